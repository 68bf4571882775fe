"""Acceptance corpus: every template in the pinned llama.cpp release renders a three-turn
conversation with a system prompt, thinking on and off, and gets a think control."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.engine.chat.reasoning import detect_reasoning_format
from workbench.engine.chat.template import ChatTemplate, TemplateError
from workbench.engine.chat.think import ThinkControl, probe_think_control
from workbench.paths import llama_templates_dir

# Templates that cannot render a plain conversation, each with its reason. Such a model still
# works: the session sends the turn as plain text (see docs/chat.md).
EXCLUDED = {
    "fireworks-ai-llama-3-firefunction-v2": (
        "function-calling-only template: it concatenates caller-supplied `functions` and "
        "`datetime` variables into the system prompt, which only a tool-calling request provides"
    ),
}

CONVERSATION = [
    {"role": "system", "content": "SYS-alpha: answer briefly."},
    {"role": "user", "content": "USER-one"},
    {"role": "assistant", "content": "ANS-one", "reasoning_content": "RSN-one"},
    {"role": "user", "content": "USER-two"},
    {"role": "assistant", "content": "ANS-two", "reasoning_content": "RSN-two"},
    {"role": "user", "content": "USER-three"},
]


def _template_files() -> list[Path]:
    folder = llama_templates_dir()
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.jinja"))


def test_corpus_is_present() -> None:
    folder = llama_templates_dir()
    assert folder.is_dir(), (
        f"template corpus not found at {folder}: run set-up (python -m workbench.setup_env), "
        "which unpacks the pinned llama-cpp-python sdist"
    )
    names = {p.stem for p in _template_files()}
    assert len(names) >= 40, f"only {len(names)} templates in {folder}: incomplete unpack?"
    assert set(EXCLUDED) <= names, "an exclusion names a template the corpus no longer has"


@pytest.mark.parametrize("path", _template_files(), ids=lambda p: p.stem)
@pytest.mark.parametrize("thinking", [True, False], ids=["think-on", "think-off"])
def test_template_renders_three_turns_with_system_prompt(path: Path, thinking: bool) -> None:
    template = ChatTemplate(path.read_text(encoding="utf-8"), "<BOS>", "<EOS>")
    if path.stem in EXCLUDED:
        with pytest.raises(TemplateError):  # still excluded for the stated reason
            template.render(CONVERSATION, enable_thinking=thinking)
        return
    out = template.render(CONVERSATION, add_generation_prompt=True, enable_thinking=thinking)
    for text in ("SYS-alpha", "USER-one", "ANS-one", "USER-two", "ANS-two", "USER-three"):
        assert text in out, f"{text} missing from the render"
    assert out.count("<BOS>") <= 1, "BOS printed more than once"
    assert out.rfind("USER-three") > out.rfind("ANS-two")


@pytest.mark.parametrize("path", _template_files(), ids=lambda p: p.stem)
def test_every_template_gets_a_think_control_and_a_format(path: Path) -> None:
    template = ChatTemplate(path.read_text(encoding="utf-8"), "<BOS>", "<EOS>")
    control = probe_think_control(template)
    fmt = detect_reasoning_format(template)
    assert control in set(ThinkControl)
    if not fmt.handles_reasoning:
        assert control is ThinkControl.TEMPLATE  # nothing to switch off
