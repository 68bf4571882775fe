"""A stop at any moment of the start of an answer stops it, and is spent by it.

Regression for issue 12, case 7: a cancel() made just before generate() was discarded (the
session cleared its flag at the start), so the whole answer ran and later stops were ignored.
"""

from __future__ import annotations

import pytest

from workbench.engine.requests import GenerateRequest, StopReason

Q = "Name three colours of the rainbow."
N_PREDICT = 12


@pytest.fixture
def session(embedded_model_path, open_session):
    # n_batch 4: the prompt is read in several chunks, so "during prefill" has several steps.
    return open_session(model=str(embedded_model_path), n_predict=N_PREDICT, n_batch=4,
                        n_ubatch=4)


def _baseline(session) -> list[int]:
    return list(session.kv_tokens)


def test_a_cancel_just_before_generate_stops_it(session):
    before = _baseline(session)
    session.cancel()
    result = session.generate(GenerateRequest(text=Q))
    assert result.ok and result.stop_reason is StopReason.STOPPED
    assert result.summary is None or result.summary.n_generated == 0
    assert _baseline(session) == before and result.history == ()  # the conversation stands
    # The stop was spent: the next answer runs whole.
    again = session.generate(GenerateRequest(text=Q))
    assert again.stop_reason in (StopReason.EOS, StopReason.LENGTH)
    assert again.summary.n_generated > 0


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_a_cancel_at_each_prefill_chunk_stops_before_any_token(session, chunk):
    before = _baseline(session)
    seen: list[int] = []
    tokens: list[int] = []

    def on_prefill(progress) -> None:
        seen.append(progress.done)
        if len(seen) == chunk:
            session.cancel()

    result = session.generate(GenerateRequest(text=Q), on_prefill=on_prefill,
                              on_token=lambda e: tokens.append(e.metrics.step))
    assert len(seen) >= chunk  # the prompt really had that many chunks
    assert result.stop_reason is StopReason.STOPPED
    assert tokens == []
    assert _baseline(session) == before and result.history == ()  # the conversation stands
    assert session.generate(GenerateRequest(text=Q)).summary.n_generated > 0


@pytest.mark.parametrize("step", [1, 2])
def test_a_cancel_at_each_early_token_stops_at_that_token(session, step):
    before = _baseline(session)

    def on_token(event) -> None:
        if event.metrics.step == step:
            session.cancel()

    result = session.generate(GenerateRequest(text=Q), on_token=on_token)
    assert result.stop_reason is StopReason.STOPPED
    assert result.summary.n_generated == step
    assert _baseline(session) == before and result.history == ()  # the conversation stands
    again = session.generate(GenerateRequest(text=Q))
    assert again.summary.n_generated > step


def test_a_cancel_before_a_rejected_request_is_spent_by_it(session):
    session.cancel()
    rejected = session.generate(GenerateRequest(text="   "))
    assert rejected.stop_reason is StopReason.REJECTED
    assert session.generate(GenerateRequest(text=Q)).summary.n_generated > 0
