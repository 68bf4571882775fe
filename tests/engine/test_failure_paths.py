"""Failure paths of a turn: each leaves the conversation usable and keeps no broken state.

Real engine throughout; the failure itself is injected at the one call that fails (a prefill
decode, an image encode, an image's decode, a partial KV removal), because none of them can be
made to fail on demand with a healthy model. After each: the turn says what happened, the pool
and the disk hold nothing of the broken state, and the next turn answers.
"""

from __future__ import annotations

import pytest

from tests.engine.test_images import RED
from workbench.engine.requests import GenerateRequest, StopReason

A1, A2 = "Name three colours of the rainbow.", "Which of them is the warmest?"
B1 = "Name three kinds of trees."


@pytest.fixture
def text_session(embedded_model_path, open_session, tmp_path):
    return open_session(model=str(embedded_model_path), n_predict=8, kv_dir=tmp_path / "kv")


@pytest.fixture
def vision(tiny_moe_path, tiny_mmproj_path, open_session, tmp_path):
    return open_session(model=str(tiny_moe_path), mmproj=str(tiny_mmproj_path), n_ctx=256,
                        n_predict=6, kv_dir=tmp_path / "kv")


def _ok(s, text, conversation, **request):
    r = s.generate(GenerateRequest(text=text, conversation=conversation, **request))
    assert r.ok and not r.error, r.error
    return r


def _fails_once(monkeypatch, obj, name: str, rc: int = 1) -> dict[str, int]:
    """obj.name returns `rc` on its first call (the failure), then works again."""
    real = getattr(obj, name)
    calls = {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        return rc if calls["n"] == 1 else real(*args, **kwargs)

    monkeypatch.setattr(obj, name, failing)
    return calls


def _kept_and_back(s, first: str, other: str) -> tuple:
    """Conversation 1 answers, leaves the context for 2 (its state goes to the pool), and comes
    back: the next turn of 1 (after the history returned) starts from its kept state, which a
    failure must then discard."""
    history = _ok(s, first, "1").history
    _ok(s, other, "2")
    assert s.kv_pool.get("1") is not None
    return history


def _nothing_kept(s, conversation: str) -> None:
    assert s.kv_pool.get(conversation) is None
    spill = s.kv_pool.spill
    assert spill is None or not spill.path(conversation).exists()
    # The mirror and the real memory agree: nothing half-read is left in the context.
    assert len(s.kv_tokens) == s._p.ctx.pos_max() + 1


def test_a_decode_failure_in_the_prefill(text_session, monkeypatch):
    s = text_session
    history = _kept_and_back(s, A1, B1)
    calls = _fails_once(monkeypatch, s._p.ctx, "decode")
    failed = s.generate(GenerateRequest(text=A2, history=history, conversation="1"))
    assert calls["n"] >= 1
    assert failed.stop_reason is StopReason.ERROR and "Reading the prompt failed" in failed.error
    assert s.kv_tokens == []
    _nothing_kept(s, "1")
    assert s.kv_pool.get("2") is not None  # the other conversation's state is untouched
    again = _ok(s, A2, "1", history=history)
    assert again.summary.kv_source == "fresh" and again.summary.n_generated > 0
    assert again.summary.n_reused == 0


def test_an_image_that_fails_to_encode(vision, monkeypatch):
    s = vision
    history = _kept_and_back(s, "Hello", "Hi")
    calls = _fails_once(monkeypatch, s._p.projector, "encode")
    failed = s.generate(GenerateRequest(text="Describe", history=history, conversation="1",
                                        images=(RED,)))
    assert calls["n"] == 1
    assert failed.stop_reason is StopReason.ERROR and "could not encode an image" in failed.error
    assert s.kv_tokens == [] and failed.history == history  # the failed turn was not added
    _nothing_kept(s, "1")
    again = _ok(s, "Describe", "1", history=history, images=(RED,))
    assert again.summary.images_encoded == 1


def test_an_image_whose_embeddings_fail_to_decode(vision, monkeypatch):
    s = vision
    history = _kept_and_back(s, "Hello", "Hi")
    calls = _fails_once(monkeypatch, s._p.projector, "decode_image")
    failed = s.generate(GenerateRequest(text="Describe", history=history, conversation="1",
                                        images=(RED,)))
    assert calls["n"] == 1
    assert failed.stop_reason is StopReason.ERROR and "Reading the prompt failed" in failed.error
    assert s.kv_tokens == [] and failed.history == history and len(history) == 2
    _nothing_kept(s, "1")
    again = _ok(s, "Describe", "1", history=history, images=(RED,))
    assert again.summary.images_encoded == 1 and again.summary.n_generated > 0


def test_a_kv_that_refuses_a_partial_removal_falls_back_to_reading_it_all(text_session,
                                                                          monkeypatch):
    s = text_session
    _ok(s, A1, "1")
    # The same conversation, edited (B1 after no history): only a short prefix is still shared.
    monkeypatch.setattr(s._p.ctx, "seq_rm", lambda p0, p1=-1: False)  # e.g. sliding-window KV
    r = _ok(s, B1, "1")
    assert r.summary.n_reused == 0  # the fallback cleared the memory and read everything
    assert r.summary.n_prompt == len(s.kv_tokens) - r.summary.n_generated
    assert len(s.kv_tokens) == s._p.ctx.pos_max() + 1
    monkeypatch.undo()
    # and the conversation goes on from there
    assert _ok(s, A2, "1", history=r.history).summary.n_reused > 0
