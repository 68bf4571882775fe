"""Reasoning end to end through Session: real templates, the real parser, the real model.

The embedded gemma-3-270m is a base model without a template of its own; `chat_template_file`
gives it real reasoning-model templates from the pinned llama.cpp corpus.
"""

from __future__ import annotations

import pytest

from workbench.engine.chat.think import ThinkControl
from workbench.engine.requests import GenerateRequest, TokenEvent
from workbench.paths import llama_templates_dir


def _template(name: str) -> str:
    path = llama_templates_dir() / name
    assert path.exists(), f"{path} is missing: run set-up (scripts/test) to unpack the corpus"
    return str(path)


def _collect(session, text, **kw):
    events: list[TokenEvent] = []
    result = session.generate(GenerateRequest(text=text, **kw), on_token=events.append)
    return result, events


def test_a_template_that_opens_think_streams_reasoning_not_answer(
    embedded_model_path, open_session
):
    s = open_session(model=str(embedded_model_path), n_predict=16,
                     chat_template_file=_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"))
    result, events = _collect(s, "What is 2 + 2?")
    assert result.ok and result.summary.n_generated == 16
    streamed_reasoning = "".join(e.reasoning_delta for e in events if not e.reset)
    assert result.reasoning.strip()  # the stream started inside <think>: it is reasoning
    assert streamed_reasoning.strip() and result.reasoning.startswith(streamed_reasoning)
    assert events[-1].metrics.reasoning == streamed_reasoning  # rows carry the split so far
    assert "<think>" not in result.text and "</think>" not in result.text


def test_thinking_off_by_template_flag_gives_an_answer(embedded_model_path, open_session):
    s = open_session(model=str(embedded_model_path), n_predict=12,
                     chat_template_file=_template("Qwen-Qwen3-0.6B.jinja"))
    assert s.think_control is ThinkControl.TEMPLATE
    result, events = _collect(s, "Say hello.", think=False)
    assert result.ok and result.text.strip() and result.reasoning == ""
    assert all(e.reasoning_delta == "" for e in events)


def test_thinking_off_by_prefill_for_gpt_oss(embedded_model_path, open_session):
    s = open_session(model=str(embedded_model_path), n_predict=8,
                     chat_template_file=_template("openai-gpt-oss-120b.jinja"))
    assert s.think_control is ThinkControl.PREFILL
    result, _ = _collect(s, "Say hello.", think=False)
    assert result.ok and result.reasoning == "" and result.text.strip()


def test_a_missing_template_file_is_a_clear_error(embedded_model_path, open_session, tmp_path):
    from workbench.engine.requests import SessionError

    with pytest.raises(SessionError, match=r"cannot read the chat template.*clear the setting"):
        open_session(model=str(embedded_model_path), chat_template_file=str(tmp_path / "no.jinja"))
