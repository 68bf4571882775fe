"""A conversation's answer format: declared once in the config tree (a conversation's setting,
kept by the store), checked (the schema must be JSON, and one the grammar can enforce), and
turned into the same grammar the server builds from `response_format`."""

from __future__ import annotations

import json

import pytest

from workbench.backend.grammar import SchemaError, schema_to_gbnf
from workbench.config import Config, validate
from workbench.engine.answer_format import answer_grammar, schema_problems, with_answer_format
from workbench.engine.constrain import Decoding
from workbench.store import Store
from workbench.store.conversations import checked_settings
from workbench.ui.chat.conversation_settings import KEYS, config_for, settings_of, summary

CAT = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
UNENFORCEABLE = {"type": "string", "format": "no-such-format"}


def test_the_answer_format_is_a_conversations_setting_and_round_trips_the_store(tmp_path):
    assert {"answer_format", "answer_schema"} <= KEYS
    chosen = Config().replace(answer_format="schema", answer_schema=json.dumps(CAT))
    with Store.open(tmp_path / "w.db") as store:
        conv = store.create_conversation("cats")
        other = store.create_conversation("plain")
        store.set_conversation_settings(conv.id, settings_of(chosen))
    with Store.open(tmp_path / "w.db") as store:  # after a restart
        kept = store.conversation_settings(conv.id)
        back = config_for(Config(), kept)
        plain = config_for(Config(), store.conversation_settings(other.id))
    assert (back.answer_format, json.loads(back.answer_schema)) == ("schema", CAT)
    assert plain.answer_format == "text"  # per conversation, not global
    assert checked_settings(kept) == (kept, [])  # an import or a salvage keeps them too
    assert "answers by a schema" in summary(back) and "JSON" not in summary(plain)


def test_a_schema_answer_needs_a_json_object_schema_the_grammar_can_enforce():
    def problems(schema: str) -> list[str]:
        cfg = Config().replace(answer_format="schema", answer_schema=schema)
        return [p.message for p in [*validate(cfg), *schema_problems(cfg)]]

    assert problems(json.dumps(CAT)) == []
    assert "needs a JSON schema" in problems("  ")[0]
    assert "not JSON" in problems('{"type": ')[0]
    assert "must be a JSON object" in problems("[1, 2]")[0]
    assert "no-such-format" in problems(json.dumps(UNENFORCEABLE))[0]
    # Outside the schema format the schema is not used, so it is not judged.
    assert validate(Config().replace(answer_format="json", answer_schema="[")) == []


def test_the_answer_formats_grammar_is_the_servers():
    assert answer_grammar("text", "") == ""
    assert answer_grammar("json", "") == schema_to_gbnf({"type": "object"})
    assert answer_grammar("schema", json.dumps(CAT)) == schema_to_gbnf(CAT)
    with pytest.raises(SchemaError, match="no-such-format"):
        answer_grammar("schema", json.dumps(UNENFORCEABLE))
    with pytest.raises(SchemaError, match="not JSON"):
        answer_grammar("schema", "{")


def test_a_request_with_its_own_grammar_keeps_it_and_logprobs_stay_asked_for():
    assert with_answer_format(None, "text", "") is None
    own = Decoding(grammar='root ::= "yes"')
    assert with_answer_format(own, "json", "") is own
    json_turn = with_answer_format(Decoding(logprobs=3), "json", "")
    assert json_turn is not None and json_turn.logprobs == 3
    assert json_turn.grammar == schema_to_gbnf({"type": "object"})
