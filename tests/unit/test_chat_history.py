"""What a finished turn commits to history, and divergence from the KV prefix."""

from __future__ import annotations

from workbench.engine.chat.fallback import fallback_template
from workbench.engine.chat.history import (
    REWRITES_PAST_TURN,
    STRIPS_PAST_REASONING,
    assistant_history_message,
    find_divergence,
    reads_reasoning,
    strips_past_reasoning,
)
from workbench.engine.chat.template import ChatTemplate, strip_leading_bos
from workbench.paths import llama_templates_dir


def corpus(name: str) -> ChatTemplate:
    path = llama_templates_dir() / f"{name}.jinja"
    assert path.is_file(), f"{path} is missing: run set-up (python -m workbench.setup_env)"
    return ChatTemplate(path.read_text(encoding="utf-8"), "<BOS>", "<EOS>")


def test_reasoning_is_kept_for_templates_that_read_it() -> None:
    for name in ("Qwen-Qwen3-0.6B", "openai-gpt-oss-120b", "LFM2.5-8B-A1B", "MiniMax-M3"):
        template = corpus(name)
        assert reads_reasoning(template), name
        message = assistant_history_message("weighing it", "Yes.", template)
        assert message == {"role": "assistant", "content": "Yes.",
                           "reasoning_content": "weighing it"}, name


def test_reasoning_is_dropped_for_templates_that_never_show_it() -> None:
    for template in (corpus("meta-llama-Llama-3.1-8B-Instruct"),
                     corpus("deepseek-ai-DeepSeek-R1-Distill-Llama-8B"),
                     ChatTemplate(fallback_template("chatml-arch")[0], "", "")):
        assert not reads_reasoning(template)
        assert assistant_history_message("r", "a", template) == {"role": "assistant",
                                                                 "content": "a"}


def test_no_reasoning_gives_no_reasoning_field() -> None:
    message = assistant_history_message("", "Yes.", corpus("Qwen-Qwen3-0.6B"))
    assert message == {"role": "assistant", "content": "Yes."}


def test_which_templates_strip_past_reasoning() -> None:
    assert strips_past_reasoning(corpus("Qwen-Qwen3-0.6B"))
    assert strips_past_reasoning(corpus("openai-gpt-oss-120b"))
    assert not strips_past_reasoning(corpus("MiniMax-M3"))  # prints every turn's reasoning
    assert not strips_past_reasoning(corpus("meta-llama-Llama-3.1-8B-Instruct"))


def _turn_then_next(template: ChatTemplate, reasoning: str) -> tuple[str, str]:
    """The text the KV cache holds after one generated turn, and the next turn's prompt."""
    first = [{"role": "user", "content": "2+2?"}]
    prompt = strip_leading_bos(template.render(first), template.bos_token)
    generated = (f"<think>\n{reasoning}\n</think>\n\n" if reasoning else "") + "4"
    kv_text = prompt + generated
    history = [*first, assistant_history_message(reasoning, "4", template),
               {"role": "user", "content": "and 3+3?"}]
    return kv_text, strip_leading_bos(template.render(history), template.bos_token)


def test_divergence_is_explained_when_the_template_strips_past_reasoning() -> None:
    qwen = corpus("Qwen-Qwen3-0.6B")
    kv_text, next_prompt = _turn_then_next(qwen, "add them")
    divergence = find_divergence(kv_text, next_prompt, qwen, last_turn_had_reasoning=True)
    assert divergence is not None
    assert divergence.reason == STRIPS_PAST_REASONING
    assert kv_text[: divergence.offset].endswith("<|im_start|>assistant\n")


def test_a_turn_without_reasoning_extends_the_cached_prefix() -> None:
    qwen = corpus("Qwen-Qwen3-0.6B")
    kv_text, next_prompt = _turn_then_next(qwen, "")
    assert next_prompt.startswith(kv_text)
    assert find_divergence(kv_text, next_prompt, qwen, last_turn_had_reasoning=False) is None


def test_other_rewrites_are_reported_as_such() -> None:
    llama = corpus("meta-llama-Llama-3.1-8B-Instruct")
    divergence = find_divergence("abcX", "abcY", llama, last_turn_had_reasoning=False)
    assert divergence is not None
    assert divergence.offset == 3 and divergence.reason == REWRITES_PAST_TURN
