"""A conversation's answer format (the `answer_format` and `answer_schema` settings): the grammar
an answer is held to while it is sampled, the same the server builds from `response_format`
(server/structured.py): `json` is any JSON object, `schema` JSON that validates against the
answer schema. Both compile with `backend.grammar.schema_to_gbnf`, so a schema feature the
grammar cannot enforce is refused by name here as it is there.

The format is a turn setting: a turn whose request carries its own grammar (the server's
`response_format`, a tool call's) keeps that one.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from workbench.backend.grammar import SchemaError, schema_to_gbnf
from workbench.config import Config, Problem
from workbench.engine.constrain import Decoding

TEXT, JSON, SCHEMA = "text", "json", "schema"
JSON_OBJECT: dict[str, Any] = {"type": "object"}  # what "any JSON object" compiles from


def answer_grammar(answer_format: str, answer_schema: str) -> str:
    """The GBNF an answer in this format must match ("" for free text); SchemaError when the
    schema is not JSON or names a feature the grammar cannot enforce."""
    if answer_format == JSON:
        return schema_to_gbnf(JSON_OBJECT)
    if answer_format != SCHEMA:
        return ""
    try:
        schema = json.loads(answer_schema)
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"the answer schema is not JSON ({exc})") from None
    return schema_to_gbnf(schema)


def with_answer_format(decoding: Decoding | None, answer_format: str,
                       answer_schema: str) -> Decoding | None:
    """The turn's decoding with the answer format's grammar, unless it has a grammar of its own
    (its log-probabilities stay as asked); SchemaError as `answer_grammar`."""
    if decoding is not None and decoding.grammar:
        return decoding
    grammar = answer_grammar(answer_format, answer_schema)
    if not grammar:
        return decoding
    return replace(decoding or Decoding(), grammar=grammar, grammar_root="root")


def schema_problems(cfg: Config) -> list[Problem]:
    """What config.validate cannot check without the backend: whether the grammar can hold an
    answer to the schema (the settings panel shows it under the schema, and refuses Apply)."""
    if cfg.answer_format != SCHEMA or not isinstance(cfg.answer_schema, str):
        return []
    try:
        json.loads(cfg.answer_schema)
    except (ValueError, RecursionError):
        return []  # config.check_answer_schema says so
    try:
        answer_grammar(SCHEMA, cfg.answer_schema)
    except SchemaError as exc:
        return [Problem("answer_schema", f"the answer schema cannot be enforced: {exc}")]
    return []
