"""Tool calls through the real `openai` client on a localhost port (slow: the bundled SmolLM2,
whose template cannot show tools: the generic format, held to its grammar). An agent loop:
a forced call, the tool's reply, a final answer; streamed calls rebuilt by the client's own
accumulator; bad tool fields refused with a 400 that names them."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

WEATHER = {
    "type": "object", "required": ["city", "unit"], "additionalProperties": False,
    "properties": {"city": {"type": "string", "maxLength": 20},
                   "unit": {"enum": ["celsius", "fahrenheit"]}}}
TIME = {"type": "object", "required": ["zone"],
        "properties": {"zone": {"type": "string", "maxLength": 20}}}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather now",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
                                      "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def _check_calls(calls):
    assert calls, "no tool call"
    for call in calls:
        assert call.type == "function" and call.id
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_agent_loop_call_tool_reply_final_answer(served):
    client = served.client()
    first = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                           tool_choice="required", temperature=0, max_tokens=80)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    _check_calls(choice.message.tool_calls)
    call = choice.message.tool_calls[0]
    conversation = [*ASK, choice.message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id,
                     "content": json.dumps({"temperature": 18, "sky": "clear"})}]
    final = client.chat.completions.create(model="any", messages=conversation, tools=TOOLS,
                                           tool_choice="none", temperature=0, max_tokens=40)
    answer = final.choices[0]
    assert answer.finish_reason in ("stop", "length")
    assert answer.message.tool_calls is None
    assert answer.message.content and answer.message.content.strip()
    # The call and the tool's reply were in the prompt: it is longer than the question alone.
    alone = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                           tool_choice="none", temperature=0, max_tokens=1)
    assert final.usage.prompt_tokens > alone.usage.prompt_tokens + 20


def test_a_named_function_is_the_one_called(served):
    reply = served.client().chat.completions.create(
        model="any", messages=ASK, tools=TOOLS, temperature=0, max_tokens=80,
        tool_choice={"type": "function", "function": {"name": "get_time"}})
    calls = reply.choices[0].message.tool_calls
    _check_calls(calls)
    assert {c.function.name for c in calls} == {"get_time"}


def test_parallel_tool_calls_false_makes_one_call(served):
    reply = served.client().chat.completions.create(
        model="any", messages=ASK, tools=TOOLS, tool_choice="required",
        parallel_tool_calls=False, temperature=0, max_tokens=80)
    assert len(reply.choices[0].message.tool_calls) == 1


def test_streamed_calls_are_rebuilt_by_the_client_accumulator(served):
    client = served.client()
    with client.chat.completions.stream(model="any", messages=ASK, tools=TOOLS,
                                        tool_choice="required", temperature=0,
                                        max_tokens=80) as stream:
        for _ in stream:
            pass
        streamed = stream.get_final_completion()
    whole = client.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                           tool_choice="required", temperature=0, max_tokens=80)
    got, want = streamed.choices[0], whole.choices[0]
    assert got.finish_reason == "tool_calls"
    _check_calls(got.message.tool_calls)
    assert [(c.function.name, c.function.arguments) for c in got.message.tool_calls] == \
        [(c.function.name, c.function.arguments) for c in want.message.tool_calls]
    assert not got.message.content  # the call's JSON never streamed as text


def test_auto_answers_with_text_or_a_valid_call(served):
    reply = served.client().chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Hello! Who are you?"}],
        tools=TOOLS, temperature=0, max_tokens=60)
    choice = reply.choices[0]
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls"
        _check_calls(choice.message.tool_calls)
    else:
        # Never the generic format's JSON wrapper: the answer's text itself (or, cut by
        # max_tokens, the text with why it is not a call).
        assert choice.message.content
        extra = reply.model_extra["x_workbench"]
        assert not choice.message.content.lstrip().startswith('{"response"') or \
            (choice.finish_reason == "length" and extra.get("tool_error"))


@pytest.mark.parametrize(("body", "param"), [
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]},
     "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}}}]},
     "tools[0].function.parameters"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "response_format"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"messages": [*ASK, {"role": "assistant", "tool_calls": [{"id": "c", "function": 3}]},
                   {"role": "tool", "tool_call_id": "c", "content": "x"}]},
     "messages[1].tool_calls[0]"),
    ({"messages": [*ASK, {"role": "tool", "content": "x"}]}, "messages[1].tool_call_id"),
])
def test_bad_tool_fields_are_a_400_that_names_them(served, body, param):
    reply = httpx.post(served.base + "/chat/completions", timeout=30,
                       json={"model": "any", "messages": ASK, "max_tokens": 4, **body})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param
