"""Structured output's pure parts: schemas to grammars (and the features refused, by name),
the request fields to a Decoding, the log-probability shapes."""

from __future__ import annotations

import math
import re

import pytest

from workbench.backend.grammar import SchemaError, schema_to_gbnf
from workbench.engine.token_choice import TokenChoice
from workbench.server.errors import ApiError
from workbench.server.protocol import parse_chat, parse_completion
from workbench.server.structured import LogprobsOut, chat_logprobs, completion_logprobs

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(("schema", "named"), [
    ({"type": "integer", "multipleOf": 3}, "multipleOf"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "object", "properties": {"a": {"type": "number", "maximum": 3}}}, "maximum"),
    ({"type": "object", "properties": {"a": {"type": "integer", "minimum": 5}}}, "minimum"),
    ({"type": "integer", "minimum": 0, "maximum": 10**6}, "minimum"),
    ({"type": "number", "exclusiveMinimum": 0}, "exclusiveMinimum"),
    ({"type": "string", "format": "email"}, "email"),
    ({"type": "string", "pattern": "^a+$", "maxLength": 3}, "pattern"),
    ({"$ref": "https://example.com/s.json"}, "$ref"),
    ({"anyOf": [{"type": "object", "patternProperties": {"^x": {}}}]}, "patternProperties"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}}, "'if'"),
])
def test_a_schema_feature_the_grammar_cannot_enforce_is_named(schema, named):
    with pytest.raises(SchemaError, match=re.escape(named)):
        schema_to_gbnf(schema)


def test_bounded_integers_and_non_negative_numbers_become_rules():
    small = schema_to_gbnf({"type": "integer", "minimum": 2, "maximum": 4})
    assert '"2" | "3" | "4"' in small
    natural = schema_to_gbnf({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1}, "x": {"type": "number", "minimum": 0}}})
    assert '"-"' not in natural.split("n ::=")[-1].split("\n")[0]
    assert "[1-9] [0-9]{0,15}" in natural


def test_response_format_and_logprob_fields_become_a_decoding():
    plain = parse_chat({"messages": USER, "response_format": {"type": "text"}}).decoding
    assert not plain.active
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    call = parse_chat({"messages": USER, "logprobs": True, "top_logprobs": 3,
                       "response_format": {"type": "json_schema", "json_schema": {
                           "name": "x", "strict": True, "schema": schema}}})
    assert call.decoding.logprobs == 3 and "root ::=" in call.decoding.grammar
    assert parse_chat({"messages": USER, "logprobs": True}).decoding.logprobs == 0
    assert parse_chat({"messages": USER, "logprobs": False}).decoding.logprobs == -1
    obj = parse_chat({"messages": USER, "response_format": {"type": "json_object"}}).decoding
    assert "root ::=" in obj.grammar
    comp = parse_completion({"prompt": "a", "grammar": 'root ::= "yes" | "no"', "logprobs": 2})
    assert comp.decoding.grammar == 'root ::= "yes" | "no"' and comp.decoding.logprobs == 2
    for body in ({"prompt": "a", "logprobs": 6}, {"prompt": "a", "logprobs": True},
                 {"prompt": "a", "grammar": "root ::= x",
                  "response_format": {"type": "json_object"}}):
        with pytest.raises(ApiError) as caught:
            parse_completion(body)
        assert caught.value.status == 400


def _choice(text: str, lp: float) -> TokenChoice:
    return TokenChoice(token=1, piece=text.encode(), logprob=lp,
                       top=((1, text.encode(), lp), (2, b"\xe2\x80", math.log(0.1))))


def test_logprob_shapes_as_openai_sends_them():
    chat = chat_logprobs([_choice("Hi", -0.5)])
    entry = chat["content"][0]
    assert entry["token"] == "Hi" and entry["bytes"] == [72, 105] and entry["logprob"] == -0.5
    # Half a UTF-8 character is spelt as its bytes, never a replacement character.
    assert entry["top_logprobs"][1]["token"] == "bytes:\\xe2\\x80"
    comp = completion_logprobs([_choice("ab", -1.0), _choice("c", -2.0)], offset=3)
    assert comp["tokens"] == ["ab", "c"] and comp["text_offset"] == [3, 5]
    assert comp["token_logprobs"] == [-1.0, -2.0] and comp["top_logprobs"][0]["ab"] == -1.0
    out = LogprobsOut("completion", True)
    out.add(_choice("ab", -1.0))
    assert out.pending()["text_offset"] == [0] and out.pending() is None
    out.add(_choice("c", -1.0))
    assert out.pending()["text_offset"] == [2]
    assert len(out.whole()["tokens"]) == 2
    assert LogprobsOut("chat", False).whole() is None
