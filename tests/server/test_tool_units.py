"""Tool calls in the server's pure parts: the request's tools and conversation in, the
response's calls out, and a stream that holds back what may be a call."""

from __future__ import annotations

import json

from workbench.engine.requests import GenerateResult, StopReason
from workbench.engine.tools.calls import ToolCall
from workbench.server.protocol import parse_chat
from workbench.server.responses import ChunkMaker, chat_response
from workbench.server.tools import CallHoldback

TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}}}}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_time", "arguments": '{"zone": "UTC"}'}}


def test_tools_a_past_call_and_a_tool_reply_become_the_call():
    call = parse_chat({"messages": [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
    ], "tools": [TOOL], "tool_choice": "required", "parallel_tool_calls": False})
    assert call.tools is not None and call.tools.forced and not call.tools.parallel
    assert [t.name for t in call.tools.tools] == ["get_time"]
    assert json.loads(call.history[1]["tool_calls"]) == [CALL]
    assert call.last_message == {"role": "tool", "content": "12:00", "tool_call_id": "call_1"}
    assert call.text == "12:00"


def test_a_named_function_and_none():
    named = parse_chat({"messages": [{"role": "user", "content": "x"}], "tools": [TOOL],
                        "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
    assert named.tools.forced and named.tools.function == "get_time"
    none = parse_chat({"messages": [{"role": "user", "content": "x"}], "tools": [TOOL],
                       "tool_choice": "none"})
    assert not none.calls_allowed


def _result(text: str, calls: tuple[ToolCall, ...] = (), error: str = "") -> GenerateResult:
    return GenerateResult(ok=True, stop_reason=StopReason.EOS, text=text, tool_calls=calls,
                          tool_error=error)


def test_a_response_carries_the_calls_with_their_ids_and_finish_reason():
    out = chat_response("r", "m", 0, _result("", (ToolCall("get_time", '{"zone": "UTC"}',
                                                           "call_1"),)), ())
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [CALL]


def test_a_malformed_call_is_text_with_the_reason_beside_it():
    out = chat_response("r", "m", 0, _result("<tool_call>{", error="cut"), ())
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "<tool_call>{"}
    assert out["choices"][0]["finish_reason"] == "stop"
    assert out["x_workbench"]["tool_error"] == "cut"


def test_stream_deltas_give_each_call_its_index_id_and_arguments():
    chunks = ChunkMaker("chat", "r", "m").calls(_result("", (
        ToolCall("a", "{}", "call_a"), ToolCall("b", '{"x": 1}', "call_b"))))
    deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks]
    assert [(d["index"], d["id"], d["function"]["name"], d["function"]["arguments"])
            for d in deltas] == [(0, "call_a", "a", "{}"), (1, "call_b", "b", '{"x": 1}')]


def test_the_holdback_sends_text_up_to_a_call_and_never_the_call():
    held = CallHoldback(("<tool_call>",))
    sent = [held.feed(d) for d in ("Let me ", "check <to", "ol_call>{\"name\"", ": 1}")]
    assert sent == ["Let me ", "check ", "", ""]
    assert held.finish("Let me check") == ""  # the parsed content adds nothing past it
    plain = CallHoldback(("<tool_call>",))
    assert plain.feed("a <to") == "a " and plain.feed("ast>") == "<toast>"
    assert plain.finish("a <toast>") == ""


def test_the_holdback_holds_the_whole_answer_for_a_json_format():
    held = CallHoldback(("",))
    assert held.feed('{"response": "hi"}') == ""
    assert held.finish("hi") == "hi"


def test_logprobs_leave_out_a_stop_strings_tokens():
    from workbench.engine.token_choice import TokenChoice
    from workbench.server.stop_filter import stop_tail_bytes
    from workbench.server.structured import LogprobsOut

    out = LogprobsOut("chat", True)
    for piece in (b"Hello", b" wor", b"ld", b" EN", b"D tail"):
        out.add(TokenChoice(token=0, piece=piece, logprob=-0.5))
    text = "Hello world END tail"
    out.cut(stop_tail_bytes(text, ("END",)))
    # " EN" begins before the stop string: its " " is kept text, so the token stays.
    assert [c["token"] for c in out.whole()["content"]] == ["Hello", " wor", "ld", " EN"]
    out = LogprobsOut("chat", True)
    for piece in (b"Hi", b" END"):
        out.add(TokenChoice(token=0, piece=piece, logprob=-0.5))
    out.cut(stop_tail_bytes("Hi END", (" END",)))
    assert [c["token"] for c in out.whole()["content"]] == ["Hi"]
    assert stop_tail_bytes("no stop", ("END",)) == 0
