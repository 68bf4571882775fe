"""Thinking control per template family, on the real templates llama.cpp ships."""

from __future__ import annotations

import pytest

from workbench.engine.chat.fallback import fallback_template
from workbench.engine.chat.reasoning import (
    ReasoningParser,
    detect_reasoning_format,
    prompt_opens_reasoning,
)
from workbench.engine.chat.template import ChatTemplate
from workbench.engine.chat.think import (
    ThinkControl,
    no_think_prefill,
    probe_think_control,
    think_control_note,
)
from workbench.paths import llama_templates_dir

HELLO = [{"role": "user", "content": "hi"}]


def corpus(name: str) -> ChatTemplate:
    path = llama_templates_dir() / f"{name}.jinja"
    assert path.is_file(), f"{path} is missing: run set-up (python -m workbench.setup_env)"
    return ChatTemplate(path.read_text(encoding="utf-8"), "<BOS>", "<EOS>")


FAMILIES = {
    # the template reads the switch and closes the span itself
    "Qwen-Qwen3-0.6B": ThinkControl.TEMPLATE,
    "Qwen3.5-4B": ThinkControl.TEMPLATE,
    "google-gemma-4-31B-it": ThinkControl.TEMPLATE,
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ThinkControl.TEMPLATE,  # llama.cpp's patched copy
    "ByteDance-Seed-OSS": ThinkControl.TEMPLATE,  # via thinking_budget = 0
    "NVIDIA-Nemotron-Nano-v2": ThinkControl.TEMPLATE,  # via its "/no_think" soft switch
    # the switch is ignored but the template shows how an answer-only turn starts
    "openai-gpt-oss-120b": ThinkControl.PREFILL,
    # no way to express "no reasoning": the model reasons past a bare closed span
    "LFM2.5-8B-A1B": ThinkControl.NONE,
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": ThinkControl.NONE,
    # no reasoning markers at all: nothing to switch off
    "LFM2-8B-A1B": ThinkControl.TEMPLATE,
    "meta-llama-Llama-3.1-8B-Instruct": ThinkControl.TEMPLATE,
}


@pytest.mark.parametrize(("name", "expected"), sorted(FAMILIES.items()))
def test_think_control_per_family(name: str, expected: ThinkControl) -> None:
    template = corpus(name)
    assert probe_think_control(template) is expected
    prefill = no_think_prefill(template)
    assert (prefill != "") == (expected is ThinkControl.PREFILL)


def test_template_control_really_closes_the_span_when_off() -> None:
    for name in ("Qwen-Qwen3-0.6B", "google-gemma-4-31B-it",
                 "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"):
        template = corpus(name)
        fmt = detect_reasoning_format(template)
        on = template.render(HELLO, enable_thinking=True)
        off = template.render(HELLO, enable_thinking=False)
        assert on != off
        assert not prompt_opens_reasoning(off, fmt), name
    r1 = corpus("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")
    assert prompt_opens_reasoning(r1.render(HELLO, enable_thinking=True),
                                  detect_reasoning_format(r1))


def test_gpt_oss_prefill_primes_the_final_channel_and_the_answer_streams_as_answer() -> None:
    gpt = corpus("openai-gpt-oss-120b")
    prefill = no_think_prefill(gpt)
    assert prefill == "<|channel|>final<|message|>"
    prompt = gpt.render(HELLO, enable_thinking=False) + prefill
    fmt = detect_reasoning_format(gpt)
    parser = ReasoningParser(fmt, starts_in_reasoning=prompt_opens_reasoning(prompt, fmt))
    parser.feed("Hello")
    parser.feed("!")
    final = parser.finish()
    assert (final.reasoning, final.answer) == ("", "Hello!")


def test_chatml_without_reasoning_is_template_controlled() -> None:
    plain = ChatTemplate(fallback_template("chatml-arch")[0], "", "<|im_end|>")
    assert probe_think_control(plain) is ThinkControl.TEMPLATE
    assert no_think_prefill(plain) == ""


def test_a_template_that_cannot_render_fails_open() -> None:
    broken = ChatTemplate("{{ raise_exception('no') }}", "", "")
    assert probe_think_control(broken) is ThinkControl.TEMPLATE
    assert no_think_prefill(broken) == ""


def test_an_explicit_answer_opener_after_the_span_makes_prefill_work() -> None:
    # A made-up family in the style of Kimi/Cohere: the switch is not read, but a turn without
    # reasoning is written with a closed span followed by a response opener.
    source = (
        "{% for m in messages %}<{{ m.role }}>"
        "{% if m.role == 'assistant' %}<think></think><response>{% endif %}"
        "{{ m.content }}</{{ m.role }}>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    template = ChatTemplate(source, "", "")
    assert probe_think_control(template) is ThinkControl.PREFILL
    assert no_think_prefill(template) == "<think></think><response>"


def test_think_control_values_are_the_names_the_ui_shows() -> None:
    assert [c.value for c in ThinkControl] == ["template", "prefill", "none"]


def test_every_control_has_a_note_for_the_ui() -> None:
    notes = {think_control_note(c) for c in ThinkControl}
    assert len(notes) == 3 and all(notes)
    assert "always reasons" in think_control_note(ThinkControl.NONE)
