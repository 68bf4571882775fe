"""Tool calls on the engine with the bundled SmolLM2 (slow): every format's grammar parses in
llama.cpp (lazy patterns too); a lazy grammar leaves the text before its trigger free and holds
what follows; a Hermes template (Qwen 2.5's, which SmolLM2's ChatML tokens fit) makes a forced
call that parses and validates, and a tool's reply is the next turn's message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from workbench.engine.constrain import Decoding
from workbench.engine.requests import GenerateRequest, StopReason
from workbench.engine.tools.calls import Tool, ToolCalling
from workbench.engine.tools.formats import ALL_FORMATS, HERMES
from workbench.paths import llama_templates_dir

pytestmark = pytest.mark.slow

PARAMS = {"type": "object", "required": ["city"], "additionalProperties": False,
          "properties": {"city": {"type": "string", "maxLength": 20}}}
WEATHER = Tool("get_weather", json.dumps(PARAMS), json.dumps(
    {"type": "function", "function": {"name": "get_weather", "description": "The weather now",
                                      "parameters": PARAMS}}))
TIME = Tool("get_time", json.dumps({"type": "object"}), json.dumps(
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}))
ASK = "What is the weather in Paris?"


@pytest.fixture(scope="module")
def session(chat_model_path: Path):
    from workbench.config import Config
    from workbench.engine.session import Session

    opened = Session.open(Config(model=str(chat_model_path), n_ctx=2048, n_predict=48,
                                 n_threads=2))
    yield opened
    opened.close()


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("choice", ["auto", "required"])
def test_every_format_grammar_is_accepted_by_llama_cpp(session, fmt, choice):
    grammar = fmt.grammar(ToolCalling((WEATHER, TIME), choice))
    result = session.generate(GenerateRequest(
        text=ASK, new_chat=True, n_predict=2,
        decoding=Decoding(grammar=grammar.gbnf, triggers=grammar.triggers)))
    assert result.ok, result.error


def test_a_lazy_grammar_leaves_the_text_before_its_trigger_free(session):
    free = session.generate(GenerateRequest(text=ASK, new_chat=True, n_predict=24))
    word = re.findall(r"[A-Za-z]{4,}", free.text)[2]  # a word a few tokens in
    before = free.text[:free.text.index(word) + len(word)]
    grammar = f'root ::= "{word}" [^ ]{{0,4}} " {{" [0-9]{{3}} "}}"'
    lazy = session.generate(GenerateRequest(
        text=ASK, new_chat=True, n_predict=48,
        decoding=Decoding(grammar=grammar, triggers=(rf"[\s\S]*?({word})[\s\S]*",))))
    assert lazy.stop_reason is StopReason.EOS, lazy.text
    assert lazy.text.startswith(before)  # free until the trigger: the same greedy text
    assert re.fullmatch(re.escape(word) + r"\S{0,4} \{[0-9]{3}\}", lazy.text[len(before)
                                                                              - len(word):])


@pytest.fixture(scope="module")
def hermes_session(chat_model_path: Path):
    from workbench.config import Config
    from workbench.engine.session import Session

    template = llama_templates_dir() / "Qwen-Qwen2.5-7B-Instruct.jinja"
    opened = Session.open(Config(model=str(chat_model_path), n_ctx=2048, n_predict=60,
                                 n_threads=2, chat_template_file=str(template)))
    yield opened
    opened.close()


def test_a_forced_call_in_hermes_format_parses_validates_and_carries_on(hermes_session):
    assert hermes_session.tool_format is HERMES
    calling = ToolCalling((WEATHER, TIME), "required", function="get_weather", parallel=False)
    first = hermes_session.generate(GenerateRequest(text=ASK, new_chat=True, tools=calling))
    assert first.ok and first.tool_error == "", first.text
    (call,) = first.tool_calls
    assert call.name == "get_weather" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.arguments), PARAMS)
    assert "<tool_call>" not in first.text
    said = first.history[-1]
    assert json.loads(said["tool_calls"])[0]["function"]["name"] == "get_weather"
    reply = {"role": "tool", "tool_call_id": call.id, "content": "REPLY: 18 degrees"}
    second = hermes_session.generate(GenerateRequest(
        text=reply["content"], message=reply, history=first.history,
        tools=ToolCalling((WEATHER, TIME), "none")))
    assert second.ok and second.tool_calls == () and second.text
    assert second.history[-2] == reply  # the tool's reply is in the conversation


def test_a_trigger_whose_text_the_grammar_refuses_leaves_the_turn_free(session):
    # llama.cpp's own lazy sampler throws through the C API here, and the process aborts.
    free = session.generate(GenerateRequest(text=ASK, new_chat=True, n_predict=16))
    word = re.findall(r"[A-Za-z]{4,}", free.text)[0]
    refused = session.generate(GenerateRequest(
        text=ASK, new_chat=True, n_predict=16,
        decoding=Decoding(grammar='root ::= "Zzzz"', triggers=(rf"[\s\S]*?({word})[\s\S]*",))))
    assert refused.ok and refused.text == free.text
