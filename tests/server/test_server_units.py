"""The server's pure parts: request validation, stop strings, slot choice, the queue bound."""

from __future__ import annotations

import pytest

from workbench.server.admission import Admission
from workbench.server.errors import ApiError
from workbench.server.protocol import parse_chat, parse_completion, parse_json
from workbench.server.responses import DeltaTracker
from workbench.server.slots import Match, Slots
from workbench.server.stop_filter import StopFilter, cut_at_stop

USER = [{"role": "user", "content": "hi"}]


def test_a_chat_request_becomes_a_typed_call():
    call = parse_chat({"model": "x", "messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "assistant", "content": None},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ], "temperature": 0.5, "seed": 3, "max_tokens": 7, "stop": "END", "stream": True,
        "stream_options": {"include_usage": True}, "unknown_extra": {"anything": 1}})
    assert call.history == [{"role": "system", "content": "be brief"},
                            {"role": "assistant", "content": ""}]
    assert call.text == "ab"
    assert call.settings == {"temp": 0.5, "seed": 3}
    assert (call.max_tokens, call.stop, call.stream, call.include_usage) == (7, ("END",), True,
                                                                            True)


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": "hi"}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
     "messages[0].content[0]"),
    ({"messages": [{"role": "assistant", "content": "x"}]}, "messages[0].role"),
    ({"messages": USER, "temperature": "hot"}, "temperature"),
    ({"messages": USER, "temperature": True}, "temperature"),
    ({"messages": USER, "seed": 1.5}, "seed"),
    ({"messages": USER, "max_tokens": 0}, "max_tokens"),
    ({"messages": USER, "max_tokens": "8"}, "max_tokens"),
    ({"messages": USER, "stop": ["", "x"]}, "stop"),
    ({"messages": USER, "stop": 3}, "stop"),
    ({"messages": USER, "stream": "yes"}, "stream"),
    ({"messages": USER, "n": 2}, "n"),
    ({"messages": USER, "tools": [{"type": "function"}]}, "tools[0]"),
    ({"messages": USER, "logprobs": 1}, "logprobs"),
    ({"messages": USER, "top_logprobs": 3}, "top_logprobs"),
    ({"messages": USER, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"messages": USER, "response_format": {"type": "xml"}}, "response_format.type"),
    ({"messages": USER, "response_format": {"type": "json_schema"}},
     "response_format.json_schema"),
    ({"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "n", "schema": {"type": "object", "not": {"required": ["a"]}}}}},
     "response_format.json_schema.schema"),
    ({"messages": USER, "grammar": 5}, "grammar"),
    ({"messages": USER, "model": 7}, "model"),
])
def test_a_bad_chat_field_is_a_400_that_names_it(body, param):
    with pytest.raises(ApiError) as caught:
        parse_chat(body)
    assert caught.value.status == 400
    assert caught.value.param == param
    assert caught.value.body()["error"]["message"]


def test_completion_prompts_and_their_refusals():
    assert parse_completion({"prompt": ["once"]}).text == "once"
    for body in ({"prompt": ""}, {"prompt": ["a", "b"]}, {"prompt": "a", "echo": True},
                 {"prompt": "a", "suffix": "z"}):
        with pytest.raises(ApiError):
            parse_completion(body)


def test_malformed_json_is_a_400():
    for raw in (b"{", b"[1]", b"\xff"):
        with pytest.raises(ApiError) as caught:
            parse_json(raw)
        assert caught.value.status == 400


def test_stop_strings_are_held_back_until_they_cannot_match():
    f = StopFilter(("END",))
    out = [f.feed(d) for d in ("Hello E", "N", "ough")]
    assert out == ["Hello ", "", "ENough"]
    f = StopFilter(("END", "\n\n"))
    assert f.feed("ab") + f.feed("cE") + f.feed("ND tail") == "abc"
    assert f.stopped and f.feed("more") == "" and f.flush() == ""
    f = StopFilter(("END",))
    assert f.feed("xE") == "x" and f.flush() == "E"
    assert StopFilter(()).feed("E") == "E"
    assert cut_at_stop("a STOP b stop", ("stop", "STOP")) == ("a ", True)


def test_the_delta_tracker_sends_only_what_is_new():
    t = DeltaTracker()
    assert t.update("He", "") == ("He", "")
    assert t.update("Hello", "") == ("llo", "")
    # Reclassified (the answer so far was reasoning): the reasoning comes whole; the answer
    # already sent cannot be taken back, and no more of it is sent until it grows again.
    assert t.update("", "Hello") == ("", "Hello")
    assert t.update("ok", "Hello!") == ("ok", "!")


def test_a_request_continues_the_key_that_shares_most_of_its_prefix():
    slots = Slots()
    a, b = slots.new(), slots.new()
    held = {a: Match(a, 90, 100), b: Match(b, 10, 100)}
    assert slots.choose(held.get).key == a
    # Sharing less than half of what a key holds: a fresh key, not another client's state.
    assert slots.choose({a: Match(a, 40, 100), b: Match(b, 10, 100)}.get) is None
    assert slots.choose(lambda key: None) is None


def test_forgotten_slots_are_handed_back():
    slots = Slots(max_slots=2)
    keys = [slots.new() for _ in range(3)]
    assert slots.keys == keys[1:]
    assert slots.take_forgotten() == keys[:1] and slots.take_forgotten() == []


def test_the_queue_bound_refuses_with_retry_after():
    admission = Admission(max_waiting=1)
    admission.admit()
    admission.admit()
    with pytest.raises(ApiError) as caught:
        admission.admit()
    assert caught.value.status == 429
    assert int(caught.value.headers["Retry-After"]) >= 1
    admission.release(2.0)
    admission.admit()  # a place came free
    assert admission.refused == 1


class _Opened:
    """What `request_settings` reads of an open session: its config."""

    def __init__(self, model: str, system_prompt: str = "") -> None:
        from workbench.config import Config

        self.config = Config(model=model, temp=0.0, n_predict=99, system_prompt=system_prompt)


def test_a_call_becomes_one_request_over_the_models_defaults():
    from workbench.engine.model_defaults import BUNDLED_SETTINGS
    from workbench.server.runner import RAW_KEY, build_request

    bundled = _Opened("")
    chat = build_request(bundled, parse_chat({"messages": [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"}], "temperature": 0.7, "max_tokens": 5}))
    assert chat.text == "c" and chat.history == ({"role": "user", "content": "a"},
                                                 {"role": "assistant", "content": "b"})
    assert chat.settings.system_prompt == BUNDLED_SETTINGS["system_prompt"]  # issue 39
    assert (chat.settings.temp, chat.settings.n_predict, chat.n_predict) == (0.7, 99, 5)
    assert bundled.config.temp == 0.0  # the session's own settings are untouched
    own = build_request(bundled, parse_chat({"messages": [
        {"role": "system", "content": "be brief"}, *USER]}))
    assert own.settings.system_prompt == ""  # the request's system message replaces it
    assert own.history == ({"role": "system", "content": "be brief"},)
    raw = build_request(bundled, parse_completion({"prompt": "1, 2,"}))
    assert raw.raw and raw.conversation == RAW_KEY and raw.settings.system_prompt == ""
    other = build_request(_Opened("/models/other.gguf"), parse_chat({"messages": USER}))
    assert other.settings.system_prompt == ""  # a model without defaults of its own
    typed = build_request(_Opened("", "Answer in French."), parse_chat({"messages": USER}))
    assert typed.settings.system_prompt == "Answer in French."  # serve --system-prompt wins
    typed_own = build_request(_Opened("", "Answer in French."), parse_chat({"messages": [
        {"role": "system", "content": "be brief"}, *USER]}))
    assert typed_own.settings.system_prompt == ""  # and the request's own still replaces it


def test_a_served_answer_is_free_text_whatever_the_windows_conversation_asks():
    """A server in the window shares its session: the open conversation's answer format (a
    conversation setting) must not hold the API's answers; `response_format` decides."""
    from workbench.server.runner import build_request

    window = _Opened("")
    window.config = window.config.replace(answer_format="schema",
                                          answer_schema='{"type": "object"}')
    call = build_request(window, parse_chat({"messages": USER}))
    assert (call.settings.answer_format, call.settings.answer_schema) == ("text", "")
