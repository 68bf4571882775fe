"""Rendering: sandbox features real templates use, errors, system folding, the BOS contract."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from workbench.engine.chat.fallback import fallback_template
from workbench.engine.chat.template import (
    ChatTemplate,
    TemplateError,
    strip_leading_bos,
    thinking_context,
)
from workbench.paths import llama_templates_dir

HELLO = [{"role": "user", "content": "hello"}]


def tpl(source: str, bos: str = "<s>", eos: str = "</s>") -> ChatTemplate:
    return ChatTemplate(source=source, bos_token=bos, eos_token=eos)


def corpus(name: str) -> ChatTemplate:
    path = llama_templates_dir() / f"{name}.jinja"
    assert path.is_file(), f"{path} is missing: run set-up (python -m workbench.setup_env)"
    return tpl(path.read_text(encoding="utf-8"), "<BOS>", "<EOS>")


def chatml(bos: str = "") -> ChatTemplate:
    source, name = fallback_template("some-arch-without-a-default")
    assert name == "chatml"
    return tpl(source, bos, "<|im_end|>")


def test_chatml_renders_turns_and_generation_prompt() -> None:
    out = chatml().render(
        [{"role": "system", "content": "be kind"}, *HELLO], add_generation_prompt=True
    )
    assert out == (
        "<|im_start|>system\nbe kind<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    no_prompt = chatml().render(HELLO, add_generation_prompt=False)
    assert not no_prompt.endswith("<|im_start|>assistant\n")


def test_raise_exception_becomes_template_error_with_its_words_and_the_fallback() -> None:
    t = tpl("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(TemplateError) as err:
        t.render(HELLO)
    assert "roles must alternate" in str(err.value)
    assert "plain text instead" in str(err.value)


def test_syntax_error_is_a_template_error_naming_the_line() -> None:
    with pytest.raises(TemplateError, match=r"does not compile \(line 2"):
        tpl("ok\n{% if %}").render(HELLO)


def test_sandbox_refuses_python_internals() -> None:
    with pytest.raises(TemplateError, match="failed to render"):
        tpl("{{ ''.__class__.__mro__[1].__subclasses__() }}").render(HELLO)


def test_tojson_is_plain_json_not_html_escaped() -> None:
    value = {"q": "<a & 'b'>", "é": [1, 2]}
    out = tpl("{{ messages[0].content | tojson }}").render(
        [{"role": "user", "content": value}]  # type: ignore[dict-item]
    )
    assert out == json.dumps(value, ensure_ascii=False)
    indented = tpl("{{ messages[0].content | tojson(indent=2) }}").render(
        [{"role": "user", "content": {"a": 1}}]  # type: ignore[dict-item]
    )
    assert indented == '{\n  "a": 1\n}'
    ascii_only = tpl("{{ 'é' | tojson(ensure_ascii=true) }}").render(HELLO)
    assert ascii_only == '"\\u00e9"'


def test_strftime_now_loop_controls_do_and_generation_tag() -> None:
    out = tpl("{{ strftime_now('%Y') }}").render(HELLO)
    assert out == str(datetime.now().year)
    loops = tpl(
        "{% for i in [1, 2, 3, 4] %}{% if i == 2 %}{% continue %}{% endif %}"
        "{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"
    ).render(HELLO)
    assert loops == "13"
    appended = tpl("{% set xs = [] %}{% do xs.append(7) %}{{ xs }}").render(HELLO)
    assert appended == "[7]"
    generation = tpl("A{% generation %}B{% endgeneration %}C").render(HELLO)
    assert generation == "ABC"


def test_trim_and_lstrip_blocks_like_hugging_face() -> None:
    source = (
        "{% for m in messages %}\n    {% if true %}\n[{{ m.content }}]\n    {% endif %}\n"
        "{% endfor %}"
    )
    assert tpl(source).render(HELLO) == "[hello]\n"


def test_callers_messages_are_not_mutated() -> None:
    messages = [*HELLO, {"role": "assistant", "content": "hi", "reasoning_content": "r"}]
    snapshot = json.dumps(messages)
    tpl("{% set _ = messages.pop() %}{{ messages | length }}").render(messages)
    assert json.dumps(messages) == snapshot


def test_past_reasoning_reaches_templates_under_their_own_field_name() -> None:
    turn = [*HELLO, {"role": "assistant", "content": "A", "reasoning_content": "R"}]
    reads_thinking = tpl("{{ messages[1].thinking }}|{{ messages[1].content }}")
    assert reads_thinking.render(turn) == "R|A"
    reads_reasoning = tpl("{{ messages[1].get('reasoning') }}")
    assert reads_reasoning.render(turn) == "R"
    empty = [*HELLO, {"role": "assistant", "content": "A", "reasoning_content": ""}]
    assert tpl("{{ 'reasoning_content' in messages[1] }}").render(empty) == "False"


def test_system_prompt_folds_into_first_user_turn_when_template_refuses_system() -> None:
    gemma2 = corpus("google-gemma-2-2b-it")
    out = gemma2.render([{"role": "system", "content": "be brief"}, *HELLO])
    assert "<start_of_turn>user\nbe brief\n\nhello<end_of_turn>" in out
    with pytest.raises(TemplateError):  # the raw template really refuses it
        gemma2._render_raw([{"role": "system", "content": "x"}, *HELLO], True, True)


def test_thinking_switch_is_passed_under_each_familys_name() -> None:
    assert thinking_context("plain", False)["enable_thinking"] is False
    hy3_off = thinking_context("reasoning_effort == 'no_think'", False)
    assert hy3_off["reasoning_effort"] == "no_think"
    assert thinking_context("reasoning_effort == 'no_think'", True)["reasoning_effort"] == "high"
    assert "reasoning_effort" not in thinking_context('"Reasoning: " + reasoning_effort', False)
    assert thinking_context("thinking_mode", False)["thinking_mode"] == "disabled"
    assert thinking_context("thinking_budget", False)["thinking_budget"] == 0
    assert "thinking_budget" not in thinking_context("thinking_budget", True)


def test_soft_switch_turns_nemotron_v2_thinking_off() -> None:
    nemotron = corpus("NVIDIA-Nemotron-Nano-v2")
    on = nemotron.render(HELLO, enable_thinking=True)
    off = nemotron.render(HELLO, enable_thinking=False)
    assert on.endswith("<think>\n") and off.endswith("<think></think>")
    assert "/no_think" not in off  # the template strips the marker it reads


# -- BOS contract -------------------------------------------------------------------------------


def test_render_keeps_a_template_printed_bos_and_adds_none_itself() -> None:
    llama = corpus("meta-llama-Llama-3.1-8B-Instruct")
    out = llama.render(HELLO)
    assert out.startswith("<BOS>") and out.count("<BOS>") == 1
    assert "<BOS>" not in chatml("<BOS>").render(HELLO)  # ChatML prints none: none is added


def test_strip_leading_bos_removes_exactly_one() -> None:
    assert strip_leading_bos("<bos><bos>x", "<bos>") == "<bos>x"
    assert strip_leading_bos("x<bos>", "<bos>") == "x<bos>"
    assert strip_leading_bos("x", "") == "x"


def test_embedded_gemma3_renders_with_bos_once_and_the_system_prompt_folded(
    embedded_model_path: Path,
) -> None:
    from workbench.moe.layout import read_model_facts

    # The embedded GGUF carries no template of its own: the session uses the built-in Gemma one.
    facts = read_model_facts(embedded_model_path)
    assert facts.chat_template == ""
    source, name = fallback_template(facts.arch)
    assert name == "gemma"
    gemma3 = tpl(source, "<bos>", "<eos>")
    messages = [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Sky colour?"},
        {"role": "assistant", "content": " Blue\n"},
        {"role": "user", "content": "Grass?"},
    ]
    out = gemma3.render(messages)
    assert out == (
        "<bos><start_of_turn>user\nAnswer in one word.\n\nSky colour?<end_of_turn>\n"
        "<start_of_turn>model\nBlue<end_of_turn>\n"
        "<start_of_turn>user\nGrass?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    stripped = strip_leading_bos(out, gemma3.bos_token)
    assert "<bos>" not in stripped  # tokenizing with add_special=True adds the only BOS
    assert "<eos>" not in out  # turns end with <end_of_turn>; EOS is never printed
