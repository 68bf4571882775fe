"""What a finished turn leaves in the conversation, and why the next prompt may not extend the last.

The session commits ``assistant_history_message()`` to its history. Templates disagree about past
reasoning: some print it back (gpt-oss for the last turn, LFM2.5 with preserve_thinking, MiniMax
M3 always), many drop it once a new user turn follows (Qwen3, DeepSeek R1, GLM). When they drop
it, the next render no longer extends the text already in the KV cache: the prompt diverges where
the old reasoning began and the rest of that turn is prefilled again. ``find_divergence()`` says
where, and whether this template convention is the reason, so the UI can explain the re-prefill.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from workbench.engine.chat.template import ChatTemplate, TemplateError

_REASONING_PROBE = "\u2063workbench-reasoning-probe\u2063"
_ANSWER = "42"

STRIPS_PAST_REASONING = "the chat template drops past reasoning from earlier turns"
REWRITES_PAST_TURN = "the chat template writes a past turn differently from how it was generated"


def _renders_reasoning(template: ChatTemplate, *, followed_by_user: bool) -> bool:
    turn = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": _ANSWER, "reasoning_content": _REASONING_PROBE},
    ]
    if followed_by_user:
        turn.append({"role": "user", "content": "and then?"})
    try:
        text = template.render(turn, add_generation_prompt=followed_by_user, enable_thinking=True)
    except TemplateError:
        return False
    return _REASONING_PROBE in text


@functools.lru_cache(maxsize=16)
def reads_reasoning(template: ChatTemplate) -> bool:
    """The template prints an assistant message's reasoning_content (at least for the last turn)."""
    return _renders_reasoning(template, followed_by_user=False)


@functools.lru_cache(maxsize=16)
def strips_past_reasoning(template: ChatTemplate) -> bool:
    """The template prints reasoning for the latest turn but drops it once a user turn follows."""
    return reads_reasoning(template) and not _renders_reasoning(template, followed_by_user=True)


def assistant_history_message(
    reasoning: str, answer: str, template: ChatTemplate
) -> dict[str, str]:
    """The assistant message to append to history after a turn, following the template's
    convention: ``reasoning_content`` is kept (separately, never inside content) only when the
    template reads it; otherwise the answer alone is the message. Never includes a prefill."""
    message = {"role": "assistant", "content": answer}
    if reasoning and reads_reasoning(template):
        message["reasoning_content"] = reasoning
    return message


def history_after_turn(history: tuple[dict[str, str], ...], user_message: dict[str, str] | None,
                       reasoning: str, answer: str, template: ChatTemplate | None, *,
                       finished: bool) -> tuple[dict[str, str], ...]:
    """The conversation after a turn: a finished chat turn adds its user message and answer;
    an unfinished one (stopped, failed) or a raw-text turn changes nothing."""
    if not finished or user_message is None or template is None:
        return history
    return (*history, user_message, assistant_history_message(reasoning, answer, template))


@dataclass(frozen=True)
class Divergence:
    offset: int  # first character of the new prompt that differs from the text in the KV cache
    reason: str  # STRIPS_PAST_REASONING or REWRITES_PAST_TURN


def find_divergence(
    kv_text: str, new_prompt: str, template: ChatTemplate, *, last_turn_had_reasoning: bool
) -> Divergence | None:
    """Compare what the KV cache holds (previous prompt + generated text, BOS-stripped as fed)
    with the next prompt (BOS-stripped). None when the new prompt extends the cached text. A
    template that trims the answer it prints back also diverges, near the end of the old turn."""
    n = 0
    limit = min(len(kv_text), len(new_prompt))
    while n < limit and kv_text[n] == new_prompt[n]:
        n += 1
    if n == len(kv_text):
        return None
    if last_turn_had_reasoning and strips_past_reasoning(template):
        return Divergence(n, STRIPS_PAST_REASONING)
    return Divergence(n, REWRITES_PAST_TURN)
