"""The model's history of a conversation with tool calls (issue #36): an answer's calls travel
with all their results, as the server's API takes them; a turn whose calls still wait is not
the model's context yet; the turn that goes on from results ends with the last one."""

from __future__ import annotations

import json
from dataclasses import dataclass

from workbench.config import Config
from workbench.engine.tools.calls import REQUIRED, ToolCall
from workbench.engine.tools.turn import calls_json
from workbench.ui.chat.context import model_history, tool_turn
from workbench.ui.chat.tool_turns import calling_of, pending_answer, stored_calls
from workbench.ui.chat.tools_file import parse_tools

CALLS = calls_json((ToolCall("weather", '{"city": "Oslo"}', "call_a"),
                    ToolCall("time", "{}", "call_b")))


@dataclass
class Msg:
    role: str
    content: str = ""
    status: str = "complete"
    reasoning: str = ""
    tool_calls: str = ""
    tool_call_id: str = ""
    tool_name: str = ""


def asked() -> list[Msg]:
    return [Msg("user", "weather and time in Oslo?"), Msg("assistant", "", tool_calls=CALLS)]


def results() -> list[Msg]:
    return [Msg("tool", "rain", tool_call_id="call_a", tool_name="weather"),
            Msg("tool", "12:00", tool_call_id="call_b", tool_name="time")]


GROUPED = [
    {"role": "user", "content": "weather and time in Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": CALLS},
    {"role": "tool", "content": "rain", "tool_call_id": "call_a", "name": "weather"},
    {"role": "tool", "content": "12:00", "tool_call_id": "call_b", "name": "time"},
]


def test_calls_travel_with_all_their_results_then_the_answer_from_them():
    path = [*asked(), *results(), Msg("assistant", "Rainy, noon."),
            Msg("user", "thanks"), Msg("assistant", "You're welcome.")]
    assert model_history(path) == [
        *GROUPED, {"role": "assistant", "content": "Rainy, noon."},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "You're welcome."}]


def test_calls_still_waiting_are_not_the_models_context():
    waiting = [*asked(), results()[0]]  # one of two calls answered
    assert model_history(waiting) == []
    assert pending_answer(waiting) is waiting[1]
    assert tool_turn(waiting) is None
    # A new question after calls left unanswered: the unanswered turn is left out whole.
    path = [*waiting, Msg("user", "never mind"), Msg("assistant", "OK.")]
    assert model_history(path) == [{"role": "user", "content": "never mind"},
                                   {"role": "assistant", "content": "OK."}]
    assert pending_answer(path) is None


def test_the_turn_after_the_results_ends_with_the_last_one():
    path = [*asked(), *results()]
    assert pending_answer(path) is None
    history, message = tool_turn(path)
    assert history == GROUPED[:-1] and message == GROUPED[-1]
    # The answer that went on from them, stopped: the results stay (the next try goes on from
    # them), the stopped answer does not.
    stopped = [*path, Msg("assistant", "Rai", status="stopped")]
    assert model_history(stopped) == GROUPED


def test_stored_calls_read_back_and_the_settings_become_the_engines_tool_calling():
    assert [(c.name, c.id) for c in stored_calls(CALLS)] == [("weather", "call_a"),
                                                               ("time", "call_b")]
    declared = [{"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}},
                 "x-workbench-command": ["echo"]}]
    tools = parse_tools(json.dumps(declared))
    assert parse_tools(tools.declaration).commands == {"weather": ("echo",)}  # kept whole
    assert calling_of(Config()) is None
    calling = calling_of(Config(tools=tools.declaration, tool_choice=REQUIRED))
    assert calling is not None and calling.forced and calling.names() == {"weather"}


def test_a_conversation_with_no_question_yet_has_an_empty_history():
    # The first send of a new chat reads the history of an empty path (or one holding only
    # an answer left without its question): nothing to send, and no error.
    assert model_history([]) == []
