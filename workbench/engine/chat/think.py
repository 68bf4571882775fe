"""How "thinking off" can be honoured for a model: probed once per template, from renders only.

TEMPLATE  the template reads the switch (its render changes): Qwen3, Gemma 4, patched R1 distills,
          and every template without reasoning markers (there is nothing to switch off).
PREFILL   the template does not read the switch, but it shows how a turn without reasoning
          starts: it closes the reasoning span and marks where the answer begins (gpt-oss primes
          its final channel). The session appends ``no_think_prefill()`` to the prompt.
NONE      neither: the template cannot express a turn without reasoning (LFM2.5, the original
          R1 distill template). A bare closed span that the model was not trained on is not
          trusted, because such models reason on past it untagged and the reasoning would be
          shown as the answer. The UI shows the switch disabled, reading ON.
"""

from __future__ import annotations

import enum
import functools

from workbench.engine.chat.formats import detect_reasoning_format
from workbench.engine.chat.reasoning import prompt_opens_reasoning
from workbench.engine.chat.template import ChatTemplate, TemplateError


class ThinkControl(enum.StrEnum):
    TEMPLATE = "template"
    PREFILL = "prefill"
    NONE = "none"


_PROBE_TURN = [{"role": "user", "content": "hi"}]
_ANSWER_PROBE = "\u2063workbench-answer-probe\u2063"


def _answer_lead_in(template: ChatTemplate) -> str | None:
    """What the template writes between the generation prompt and the answer of a final assistant
    turn that has no reasoning; None when that turn does not extend the generation prompt."""
    prompt = template.render(_PROBE_TURN, add_generation_prompt=True, enable_thinking=False)
    turn = [*_PROBE_TURN, {"role": "assistant", "content": _ANSWER_PROBE}]
    done = template.render(turn, add_generation_prompt=False, enable_thinking=False)
    cut = done.find(_ANSWER_PROBE)
    if cut < 0 or not done[:cut].startswith(prompt):
        return None
    return done[len(prompt) : cut]


@functools.lru_cache(maxsize=16)
def _probe(template: ChatTemplate) -> tuple[ThinkControl, str]:
    try:
        on = template.render(_PROBE_TURN, add_generation_prompt=True, enable_thinking=True)
        off = template.render(_PROBE_TURN, add_generation_prompt=True, enable_thinking=False)
    except TemplateError:
        return ThinkControl.TEMPLATE, ""  # fail open: the fallback template has no reasoning
    if on != off:
        return ThinkControl.TEMPLATE, ""
    fmt = detect_reasoning_format(template)
    if not fmt.handles_reasoning:
        return ThinkControl.TEMPLATE, ""
    try:
        lead_in = _answer_lead_in(template)
    except TemplateError:
        lead_in = None
    if not lead_in or prompt_opens_reasoning(off + lead_in, fmt):
        return ThinkControl.NONE, ""
    last_close = max((lead_in.rfind(m) + len(m) for m in fmt.closes if m in lead_in), default=-1)
    if last_close < 0:
        return ThinkControl.NONE, ""
    # An explicit answer start: text after the close (Kimi/Cohere style "response" openers) or a
    # close marker that is itself the answer channel's header (gpt-oss "<|channel|>final...").
    if lead_in[last_close:].strip() or fmt.reentrant:
        return ThinkControl.PREFILL, lead_in
    return ThinkControl.NONE, ""


def probe_think_control(template: ChatTemplate) -> ThinkControl:
    """Which way "thinking off" is honoured for this template (cached per template)."""
    return _probe(template)[0]


def no_think_prefill(template: ChatTemplate) -> str:
    """Text to append to the rendered prompt when control is PREFILL and thinking is off;
    "" for every other control."""
    return _probe(template)[1]


_NOTES = {
    ThinkControl.TEMPLATE: "the chat template switches thinking on and off",
    ThinkControl.PREFILL: (
        "the chat template ignores the switch; thinking off starts the answer in the prompt"
    ),
    ThinkControl.NONE: (
        "this model's chat template has no way to turn thinking off, so it always reasons"
    ),
}


def think_control_note(control: ThinkControl) -> str:
    """One line for the UI next to the Thinking switch (with NONE the switch is shown disabled)."""
    return _NOTES[control]
