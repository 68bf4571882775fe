"""Speculative decoding's identity gates: greedy output with drafts is the plain greedy output.

Every pick of a speculative run (the verify rows included) is compared bit for bit with the
plain run's, and so are the tokens and the text. llama.cpp's CPU kernels are not batch-invariant,
so the gates run at n_ubatch 1: a verify batch is then computed as one-token graphs, as plain
decoding is. (On this machine a batched verify of SmolLM2 at the default n_ubatch happened to
give the same bits too; nothing promises that.) The negative control is a verifier that keeps
the first rejected draft: the gate fails it. Each gate also asserts that drafts were made and
kept, so it cannot pass by never speculating.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.gates.gate_runs import Run
from tests.logits import recorded_logits
from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.engine.speculation import speculator

# Raw text that asks to be continued by repeating itself: prompt lookup drafts most of it.
REPEATING = ("Copy the list exactly.\nList: red apple, green pear, yellow banana, purple plum, "
             "orange peach.\nCopy: red apple, green pear, yellow banana, purple plum, orange "
             "peach.\nList: red apple, green pear, yellow banana, purple plum, orange peach.\n"
             "Copy:")
N = 40


@pytest.fixture
def spec_run(chat_model_path: Path) -> Iterator:
    sessions: list[Session] = []

    def factory(model: Path | None = None, text: str = REPEATING, **changes: object) -> Run:
        changes.setdefault("n_ubatch", 1)
        cfg = Config(model=str(model or chat_model_path), chat_template=False, n_predict=N,
                     n_ctx=512, n_threads=2).replace(**changes)
        session = Session.open(cfg)
        sessions.append(session)
        return _generate(session, text)

    yield factory
    for s in sessions:
        s.close()


def _generate(session: Session, text: str) -> Run:
    with recorded_logits(session) as logits:
        result = session.generate(GenerateRequest(text=text))
    assert result.ok, result.error
    ids = session.kv_tokens[-result.summary.n_generated:]
    run = Run(result.text, ids, logits, session)
    run.summary = result.summary  # type: ignore[attr-defined]
    return run


def assert_same_answer(plain: Run, spec: Run) -> None:
    n = len(plain.token_ids)
    assert n == N and len(spec.token_ids) == n
    # A speculative run may pick once more than the plain one (the pick after its last
    # accepted draft); every pick the answer used is compared.
    for step, (x, y) in enumerate(zip(plain.logits[:n], spec.logits[:n], strict=True)):
        assert np.array_equal(x, y), f"logits differ at step {step}: max |d| {np.abs(x - y).max()}"
    assert plain.token_ids == spec.token_ids and plain.text == spec.text


def _drafted_and_kept(run: Run) -> None:
    s = run.summary  # type: ignore[attr-defined]
    assert s.spec_drafted > 0 and s.spec_accepted > 0
    assert s.spec_decodes < s.n_generated  # fewer decodes than tokens: speculation really ran


def test_ngram_speculation_is_bit_identical_to_plain_greedy(spec_run) -> None:
    plain = spec_run()
    spec = spec_run(spec="ngram")
    _drafted_and_kept(spec)
    assert_same_answer(plain, spec)


def test_a_draft_model_is_bit_identical_to_plain_greedy(spec_run, chat_model_path) -> None:
    plain = spec_run()
    spec = spec_run(spec="draft", spec_draft_model=str(chat_model_path))
    _drafted_and_kept(spec)
    assert spec.summary.spec == "draft"  # type: ignore[attr-defined]
    assert_same_answer(plain, spec)


def test_streamed_moe_with_an_evicting_cache_is_bit_identical(spec_run, tiny_moe_path) -> None:
    """The synthetic MoE writes noise that never repeats, so it drafts for itself (same
    vocabulary by construction): every verify step routes a batch through the evicting cache."""
    streaming = {"moe_stream": True, "cache_mb": 1, "o_direct": False, "n_ctx": 256}
    text = "a b c d e f a b c d e f"
    plain = spec_run(tiny_moe_path, text, **streaming)
    spec = spec_run(tiny_moe_path, text, spec="draft", spec_draft_model=str(tiny_moe_path),
                    **streaming)
    _drafted_and_kept(spec)
    assert spec.session.streaming.streamer.counters().evictions > 0
    assert_same_answer(plain, spec)


# Plain text whose continuation repeats with variations: some drafts are kept, some rejected.
VARYING = "The cat sat on the mat. The dog sat on the log. The bird sat on the"


def test_negative_control_a_verifier_that_keeps_a_rejected_draft_fails_the_gate(
        spec_run, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = spec_run(text=VARYING)
    honest = spec_run(text=VARYING, spec="ngram")
    assert honest.summary.spec_drafted > honest.summary.spec_accepted  # a draft was rejected
    assert_same_answer(plain, honest)
    monkeypatch.setattr(speculator, "DEBUG_KEEP_FIRST_REJECTED", True)
    broken = spec_run(text=VARYING, spec="ngram")
    with pytest.raises(AssertionError):
        assert_same_answer(plain, broken)
