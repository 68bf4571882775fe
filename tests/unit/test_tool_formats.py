"""Tool calls, per family: the format detected from each template of the corpus (llama.cpp's
models/templates), a conversation with tools, a past call and a tool's reply rendered by every
template, and each format's parser on recorded outputs (written from the shapes llama.cpp's
common/chat.cpp reads): text around calls, parallel calls, and malformed calls kept as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.engine.chat.template import ChatTemplate
from workbench.engine.tools import formats as f
from workbench.engine.tools.calls import Tool, ToolCall, ToolCalling
from workbench.engine.tools.formats import detect_tool_format
from workbench.engine.tools.messages import tool_messages
from workbench.paths import llama_templates_dir

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
DECLARED = {"type": "function", "function": {"name": "get_weather",
                                             "description": "DESC-weather-now",
                                             "parameters": PARAMS}}
WEATHER = Tool("get_weather", json.dumps(PARAMS), json.dumps(DECLARED))
TIME = Tool("get_time", json.dumps({"type": "object"}), json.dumps(
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}))
CALLING = ToolCalling((WEATHER, TIME))
PAST_CALLS = json.dumps([{"id": "abcDEF123", "type": "function", "function": {
    "name": "get_weather", "arguments": json.dumps({"city": "Zanzibar"})}}])
CONVERSATION = [
    {"role": "system", "content": "SYS"},
    {"role": "user", "content": "USER-question"},
    {"role": "assistant", "content": "", "tool_calls": PAST_CALLS},
    {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather",
     "content": "REPLY-sunny-31"},
]


def _corpus() -> list[Path]:
    folder = llama_templates_dir()
    return sorted(folder.glob("*.jinja")) if folder.is_dir() else []


def _source(name: str) -> str:
    return (llama_templates_dir() / f"{name}.jinja").read_text(encoding="utf-8")


@pytest.mark.parametrize(("template", "fmt"), [
    ("Qwen-Qwen2.5-7B-Instruct", f.HERMES),
    ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", f.HERMES),
    ("Qwen-Qwen3-0.6B", f.HERMES),
    ("meta-llama-Llama-3.1-8B-Instruct", f.LLAMA3),
    ("meta-llama-Llama-3.3-70B-Instruct", f.LLAMA3),
    ("mistralai-Mistral-Nemo-Instruct-2407", f.MISTRAL),
    ("Mistral-Small-3.2-24B-Instruct-2506", f.MISTRAL_V11),
    ("openai-gpt-oss-120b", f.HARMONY),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", f.DEEPSEEK),
    ("deepseek-ai-DeepSeek-V3.1", f.DEEPSEEK_V31),
    ("meetkai-functionary-medium-v3.2", f.FUNCTIONARY_V32),
    ("meetkai-functionary-medium-v3.1", f.FUNCTIONARY_V31),
    ("fireworks-ai-llama-3-firefunction-v2", f.FIREFUNCTION),
    ("google-gemma-2-2b-it", f.GENERIC),
])
def test_the_format_is_detected_from_the_template(template, fmt):
    assert detect_tool_format(_source(template)) is fmt


def test_no_template_is_the_generic_format():
    assert detect_tool_format(None) is f.GENERIC


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_every_template_renders_tools_a_past_call_and_a_tool_reply(path):
    source = path.read_text(encoding="utf-8")
    fmt = detect_tool_format(source)
    messages = tool_messages(CONVERSATION, source, CALLING, fmt)
    text = ChatTemplate(source, "<s>", "</s>").render(messages, tools=[DECLARED])
    assert "DESC-weather-now" in text  # the tool, shown by the template or listed for it
    assert "Zanzibar" in text  # the past call's arguments
    assert '\\"Zanzibar' not in text  # ... as an object, not JSON text quoted again
    assert "REPLY-sunny-31" in text  # the tool's reply


def test_a_template_without_tool_support_gets_the_generic_polyfills():
    source = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    messages = tool_messages(CONVERSATION, source, CALLING, f.GENERIC)
    assert messages[0]["role"] == "system" and "get_weather" in messages[0]["content"]
    assert messages[0]["content"].startswith("SYS")
    call = json.loads(messages[2]["content"])
    assert call == {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Zanzibar"}}]}
    reply = json.loads(messages[3]["content"])
    assert messages[3]["role"] == "user"
    assert reply["tool_response"]["content"] == "REPLY-sunny-31"


def test_tool_choice_none_shows_no_tools():
    source = "{% for m in messages %}{{ m.content }}{% endfor %}"
    quiet = ToolCalling((WEATHER,), "none")
    messages = tool_messages(CONVERSATION[:2], source, quiet, f.GENERIC)
    assert "get_weather" not in json.dumps(messages)


W = '{"city": "Paris"}'
T = "{}"


def _calls(*pairs: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(pairs)


# (format, recorded output, the content left, the (name, arguments) calls)
RECORDED = [
    (f.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
               "</tool_call>", "", _calls(("get_weather", W))),
    (f.HERMES, 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": '
               '"Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {}}\n'
               "</tool_call>", "Let me look.", _calls(("get_weather", W), ("get_time", T))),
    (f.HERMES, "Paris is sunny.", "Paris is sunny.", ()),
    (f.LLAMA3, '{"name": "get_weather", "parameters": {"city": "Paris"}}', "",
     _calls(("get_weather", W))),
    (f.LLAMA3, '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
     "", _calls(("get_weather", W))),
    (f.LLAMA3, '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', "",
     _calls(("get_weather", W))),
    (f.LLAMA3, "It is {sunny} today.", "It is {sunny} today.", ()),
    (f.MISTRAL, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, '
                '"id": "abcDEF123"}, {"name": "get_time", "arguments": {}, "id": "xyzXYZ789"}]',
     "", _calls(("get_weather", W), ("get_time", T))),
    (f.MISTRAL_V11, '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time'
                    "[ARGS]{}", "", _calls(("get_weather", W), ("get_time", T))),
    (f.HARMONY, '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
                '{"city": "Paris"}', "", _calls(("get_weather", W))),
    (f.HARMONY, '<|start|>assistant to=functions.get_weather<|channel|>commentary json'
                '<|message|>{"city": "Paris"}<|call|>', "", _calls(("get_weather", W))),
    (f.DEEPSEEK, "I will check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                 'get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>'
                 "<｜tool▁calls▁end｜>", "I will check.", _calls(("get_weather", W))),
    (f.DEEPSEEK_V31, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                     '{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time'
                     "<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "",
     _calls(("get_weather", W), ("get_time", T))),
    (f.FUNCTIONARY_V32, 'all\nChecking.>>>get_weather\n{"city": "Paris"}>>>get_time\n{}',
     "Checking.", _calls(("get_weather", W), ("get_time", T))),
    (f.FUNCTIONARY_V32, 'get_weather\n{"city": "Paris"}', "", _calls(("get_weather", W))),
    (f.FUNCTIONARY_V31, 'Sure<function=get_weather>{"city": "Paris"}</function>', "Sure",
     _calls(("get_weather", W))),
    (f.FIREFUNCTION, 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]', "",
     _calls(("get_weather", W))),
    (f.GENERIC, '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}', "",
     _calls(("get_weather", W))),
    (f.GENERIC, '{"tool_call": {"name": "get_time", "arguments": {}}}', "",
     _calls(("get_time", T))),
    (f.GENERIC, '{"response": "Hello there"}', "Hello there", ()),
]


@pytest.mark.parametrize(("fmt", "output", "content", "calls"), RECORDED,
                         ids=[f"{r[0].name}-{i}" for i, r in enumerate(RECORDED)])
def test_recorded_outputs_parse_into_content_and_calls(fmt, output, content, calls):
    parsed = fmt.parse(output)
    assert parsed.malformed == ""
    assert parsed.content == content
    assert tuple((c.name, c.arguments) for c in parsed.calls) == calls


def test_mistral_keeps_the_ids_the_model_wrote():
    parsed = f.MISTRAL.parse('[TOOL_CALLS][{"name": "get_time", "arguments": {}, '
                             '"id": "abcDEF123"}]')
    assert parsed.calls == (ToolCall("get_time", "{}", "abcDEF123"),)


# A call cut by max_tokens, arguments that are not an object, JSON that does not parse.
MALFORMED = [
    (f.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": {"ci'),
    (f.HERMES, '<tool_call>{"name": "get_weather", "arguments": "Paris"}</tool_call>'),
    (f.LLAMA3, '<|python_tag|>{"name": get_weather}'),
    (f.MISTRAL, "[TOOL_CALLS][]"),
    (f.HARMONY, "<|channel|>commentary to=functions.get_weather <|message|>{oops"),
    (f.DEEPSEEK, "<｜tool▁calls▁begin｜>nothing here"),
    (f.FUNCTIONARY_V31, "<function=get_weather{}"),
    (f.FIREFUNCTION, "functools[{]"),
    (f.GENERIC, '{"tool_calls": [{"name": "get_weather", "arguments": {"city": '),
    (f.GENERIC, '{"something": "else"}'),
]


@pytest.mark.parametrize(("fmt", "output"), MALFORMED,
                         ids=[f"{m[0].name}-{i}" for i, m in enumerate(MALFORMED)])
def test_a_malformed_call_stays_text_and_says_why(fmt, output):
    parsed = fmt.parse(output)
    assert parsed.calls == ()
    assert parsed.content == output
    assert parsed.malformed


@pytest.mark.parametrize("fmt", f.ALL_FORMATS, ids=lambda x: x.name)
@pytest.mark.parametrize("choice", ["auto", "required"])
def test_each_format_grammar_names_every_callable_tool_and_is_lazy_only_for_auto(fmt, choice):
    grammar = fmt.grammar(ToolCalling((WEATHER, TIME), choice))
    assert grammar.gbnf.startswith("root ::=")
    assert '"get_weather' in grammar.gbnf or "get_weather" in grammar.gbnf
    if choice == "required" or fmt.generic:
        assert grammar.triggers == ()
    else:
        assert grammar.triggers
    named = fmt.grammar(ToolCalling((WEATHER, TIME), "required", function="get_time"))
    assert "get_weather" not in named.gbnf and "get_time" in named.gbnf


def _read(fmt, text: str, reasoning: str = "", calling: ToolCalling = CALLING):
    from workbench.engine.requests import GenerateResult, StopReason
    from workbench.engine.tools.turn import ToolTurn

    result = GenerateResult(ok=True, stop_reason=StopReason.EOS, text=text, reasoning=reasoning)
    ToolTurn(calling, fmt).read(result)
    return result


def test_a_read_answer_gets_ids_and_loses_the_call_markup():
    result = _read(f.HERMES, 'Sure.<tool_call>{"name": "get_time", "arguments": {}}</tool_call>')
    (call,) = result.tool_calls
    assert result.text == "Sure." and call.id.startswith("call_") and len(call.id) == 29
    assert result.tool_error == ""


def test_a_call_to_an_undeclared_tool_stays_text():
    text = '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>'
    result = _read(f.HERMES, text)
    assert result.tool_calls == () and result.text == text and "rm_rf" in result.tool_error
    named = _read(f.HERMES, '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
                  calling=ToolCalling((WEATHER, TIME), "required", function="get_weather"))
    assert named.tool_calls == () and "get_time" in named.tool_error


def test_gpt_oss_calls_are_found_where_the_reasoning_parser_put_them():
    reasoning = ('Need weather.<|channel|>commentary to=functions.get_weather <|constrain|>json'
                 '<|message|>{"city": "Paris"}')
    result = _read(f.HARMONY, "", reasoning)
    assert [c.name for c in result.tool_calls] == ["get_weather"]
    assert result.reasoning == "Need weather."


def test_the_generic_response_is_the_answer_text():
    assert _read(f.GENERIC, '{"response": "Hi there"}').text == "Hi there"


def test_a_forced_call_turns_thinking_off_and_auto_leaves_it():
    from workbench.config import Config
    from workbench.engine.requests import GenerateRequest
    from workbench.engine.turn_settings import TurnSettings

    defaults = TurnSettings.of(Config()).replace(think=True)
    forced = GenerateRequest(text="x", tools=ToolCalling((WEATHER,), "required"))
    assert forced.turn_settings(defaults).think is False
    auto = GenerateRequest(text="x", tools=ToolCalling((WEATHER,), "auto"))
    assert auto.turn_settings(defaults).think is True
