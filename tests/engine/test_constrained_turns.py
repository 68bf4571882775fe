"""A turn under a `Decoding` (engine/constrain.py), in a session: speculation steps aside with
its reason, the grammar holds, its time is recorded, and nothing of it stays for the next turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.backend.grammar import schema_to_gbnf
from workbench.config import Config
from workbench.engine.constrain import Decoding
from workbench.engine.requests import SPEC_GREEDY_ONLY, GenerateRequest, StopReason

pytestmark = pytest.mark.slow

QUOTE = ("Repeat exactly: the red fox runs past the old mill, the red fox runs past the old "
         "mill, the red fox runs past the old mill,")
SCHEMA = {"type": "object", "required": ["words"],
          "properties": {"words": {"type": "array", "maxItems": 3,
                                   "items": {"enum": ["red", "fox", "mill"]}}}}


def test_speculation_is_off_under_a_grammar_with_its_reason_and_back_after(
        open_session, chat_model_path: Path) -> None:
    config = Config(model=str(chat_model_path), n_predict=48, n_ctx=512, spec="ngram")
    session = open_session(**config.to_dict())
    grammar = Decoding(grammar=schema_to_gbnf(SCHEMA))
    result = session.generate(GenerateRequest(text=QUOTE, decoding=grammar))
    assert result.ok and result.stop_reason is StopReason.EOS, result.text
    words = json.loads(result.text)["words"]
    assert set(words) <= {"red", "fox", "mill"} and len(words) <= 3
    s = result.summary
    assert s.spec == "off: grammar" and s.spec_drafted == -1
    assert SPEC_GREEDY_ONLY not in result.notes  # not a sampling turn: the other reason
    assert s.grammar_seconds > 0
    # Log-probabilities alone turn it off too, for that turn.
    logprobs = session.generate(GenerateRequest(text=QUOTE, new_chat=True,
                                                  decoding=Decoding(logprobs=2)))
    assert logprobs.summary.spec == "off: logprobs" and logprobs.summary.grammar_seconds == -1
    # The next plain turn speculates again, unconstrained.
    plain = session.generate(GenerateRequest(text=QUOTE, new_chat=True))
    assert plain.summary.spec == "ngram" and plain.summary.grammar_seconds == -1


def test_a_grammar_that_does_not_parse_is_refused_before_any_decode(
        open_session, chat_model_path: Path) -> None:
    session = open_session(model=str(chat_model_path), n_ctx=512, n_predict=8)
    result = session.generate(GenerateRequest(text="hi",
                                              decoding=Decoding(grammar="root ::= (")))
    assert result.stop_reason is StopReason.REJECTED and "grammar" in result.error
    assert result.history == ()  # the conversation stands as it was
    assert session.generate(GenerateRequest(text="hi")).ok
