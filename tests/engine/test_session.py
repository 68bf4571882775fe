"""Session semantics on the real embedded model (gemma-3-270m) and the synthetic MoE."""

from __future__ import annotations

import threading

import pytest

from workbench.config import Config
from workbench.engine.engine_thread import EngineThread, WrongThreadError
from workbench.engine.requests import GenerateRequest, StopReason, TokenEvent
from workbench.engine.session import Session
from workbench.engine.sinks import MemorySink

# llama.cpp's CPU kernels are not batch-invariant: the same tokens decoded as one batch or one at a
# time give logits that differ by up to ~1 on gemma-3-270m (even F32 differs in the 5th digit).
# With n_ubatch=1 every token is computed alone whatever the batch, so a session that reuses its
# KV prefix and a fresh one that prefills the whole transcript must agree byte for byte.
EXACT = {"n_ubatch": 1}

Q1 = "Name three colours of the rainbow."
Q2 = "Which one of them is your favourite, and why?"


def _gen(session, text, **kw):
    return session.generate(GenerateRequest(text=text, **kw))


def test_greedy_is_deterministic_across_fresh_sessions(embedded_model_path, open_session):
    a = _gen(open_session(model=str(embedded_model_path), n_predict=32), Q1)
    b = _gen(open_session(model=str(embedded_model_path), n_predict=32), Q1)
    assert a.ok and b.ok
    assert a.summary.n_generated > 4
    assert a.text == b.text
    assert a.text.strip()


def test_second_turn_prefills_only_the_new_suffix(embedded_model_path, open_session):
    s = open_session(model=str(embedded_model_path), n_predict=24, **EXACT)
    first = _gen(s, Q1)
    second = _gen(s, Q2, history=first.history)
    assert first.ok and second.ok
    full_prompt = second.summary.n_reused + second.summary.n_prompt
    assert second.summary.n_reused > first.summary.n_prompt  # turn 1's prompt came from the KV
    assert second.summary.n_prompt < full_prompt / 2
    # A fresh session given the whole transcript answers turn 2 byte for byte the same.
    fresh = open_session(model=str(embedded_model_path), n_predict=24, **EXACT)
    again = _gen(fresh, Q2, history=second.history[:2])
    assert again.summary.n_reused == 0
    assert again.text == second.text


def test_sampling_with_a_fixed_seed_reproduces_from_a_new_chat(embedded_model_path, open_session):
    s = open_session(model=str(embedded_model_path), n_predict=24, temp=0.9, seed=1234)
    a = _gen(s, Q1, new_chat=True)
    b = _gen(s, Q1, new_chat=True)
    greedy = _gen(open_session(model=str(embedded_model_path), n_predict=24), Q1)
    assert a.text == b.text
    seeds = open_session(model=str(embedded_model_path), n_predict=24, temp=0.9, seed=99)
    assert {a.text, _gen(seeds, Q1).text, greedy.text} != {a.text}  # sampling is really on


def test_cancel_during_decode_rolls_back_and_next_turn_matches_fresh(
    embedded_model_path, open_session
):
    s = open_session(model=str(embedded_model_path), n_predict=24)
    before = list(s.kv_tokens)

    def stop_at_third(event: TokenEvent) -> None:
        if event.metrics.step == 3:
            s.cancel()

    stopped = s.generate(GenerateRequest(text=Q1), on_token=stop_at_third)
    assert stopped.ok and stopped.stop_reason is StopReason.STOPPED
    assert stopped.summary.n_generated == 3  # within one decode step of the request
    assert stopped.text  # the partial answer is returned
    assert s.kv_tokens == before
    assert stopped.history == ()  # the conversation is as it was: the request's history
    after = _gen(s, Q2)
    fresh = _gen(open_session(model=str(embedded_model_path), n_predict=24), Q2)
    assert after.text == fresh.text


def test_cancel_during_prefill_aborts_inside_llama_decode(embedded_model_path, open_session):
    # One big prefill chunk, cancelled once llama.cpp has started polling the native abort flag:
    # the stop happens inside llama_decode, between graph nodes.
    s = open_session(model=str(embedded_model_path), n_ctx=4096, n_batch=4096, n_predict=8,
                     **EXACT)
    hello = _gen(s, "Hello")
    kv_before, history_before = list(s.kv_tokens), hello.history
    long_text = " ".join(f"item {i} is a small blue box;" for i in range(350))
    polls_at_start = s._p.abort.polls

    def cancel_when_decoding() -> None:
        while s._p.abort.polls == polls_at_start:
            pass
        s.cancel()

    watcher = threading.Thread(target=cancel_when_decoding)
    watcher.start()
    result = _gen(s, long_text, history=history_before)
    watcher.join()
    assert result.stop_reason is StopReason.STOPPED
    assert result.summary is None or result.summary.n_generated == 0
    assert s.kv_tokens == kv_before[: len(s.kv_tokens)]
    assert result.history == history_before
    after = _gen(s, Q2, history=history_before)
    fresh = open_session(model=str(embedded_model_path), n_predict=8, **EXACT)
    assert after.text == _gen(fresh, Q2, history=history_before).text


def test_decode_failure_is_an_error_and_the_next_turn_works(
    embedded_model_path, open_session, monkeypatch
):
    s = open_session(model=str(embedded_model_path), n_predict=16)
    real_pick = s._pick_token
    calls = {"n": 0}

    def pick_invalid_at_fourth() -> int:
        calls["n"] += 1
        # A token id outside the vocabulary: llama.cpp itself rejects the batch (returns -1).
        return s._p.model.n_vocab + 7 if calls["n"] == 4 else real_pick()

    monkeypatch.setattr(s, "_pick_token", pick_invalid_at_fourth)
    failed = _gen(s, Q1)
    assert not failed.ok and failed.stop_reason is StopReason.ERROR
    assert "returned -1" in failed.error and "incomplete" in failed.error
    assert s.kv_tokens == [] and failed.history == ()
    monkeypatch.setattr(s, "_pick_token", real_pick)
    after = _gen(s, Q2)
    assert after.ok and after.summary.n_reused == 0
    assert after.text == _gen(open_session(model=str(embedded_model_path), n_predict=16), Q2).text


def test_overflow_and_empty_prompts_are_refused_and_leave_no_trace(
    embedded_model_path, open_session
):
    s = open_session(model=str(embedded_model_path), n_ctx=256, n_predict=64)
    empty = _gen(s, "   ")
    assert empty.stop_reason is StopReason.REJECTED and "empty" in empty.error
    big = _gen(s, "word " * 300)
    assert big.stop_reason is StopReason.REJECTED
    assert "256" in big.error and "64" in big.error and "larger context" in big.error
    assert big.history == () and s.kv_tokens == []
    assert _gen(s, "Hi").ok


def test_per_token_metrics_are_honest(embedded_model_path, open_session):
    sink = MemorySink()
    s = open_session(model=str(embedded_model_path), n_predict=12, sink=sink)
    result = _gen(s, Q1)
    rows = sink.tokens
    assert len(rows) == result.summary.n_generated > 0
    assert [r.step for r in rows] == list(range(1, len(rows) + 1))
    for r in rows:
        assert r.wall_ms > 0 and r.loop_overhead_ms >= 0 and r.cpu_ms >= 0
        assert r.compute_ms == r.wall_ms  # nothing streamed: all of the decode is compute
        assert r.rss_mib > 0 and r.rss_anon_mib >= 0 and r.mem_available_mib > 0
        # Streaming columns are unmeasured, not zero.
        assert r.io_ms == -1 and r.read_bytes == -1 and r.cache_hit_pct == -1
    assert rows[-1].text == result.text
    summary = result.summary
    assert summary.tokens_per_second == pytest.approx(
        summary.n_generated / (sum(r.wall_ms for r in rows) / 1000)
    )
    assert summary.ttft_seconds > summary.prefill_seconds > 0
    assert sink.summaries == [summary] and sink.run_info.model.fast_hash


def test_synthetic_moe_runs_raw_and_chat(tiny_moe_path, open_session):
    raw = open_session(model=str(tiny_moe_path), chat_template=False, n_predict=16, n_ctx=256)
    a = _gen(raw, "Hello world, this is a streaming test.")
    assert a.ok and a.summary.n_generated > 0
    assert raw.run_info.n_expert > 0 and raw.run_info.arch == "qwen3moe"
    chat = open_session(model=str(tiny_moe_path), n_predict=8, n_ctx=256)
    assert chat.chat_mode and _gen(chat, "hi").ok


def test_close_from_another_thread_during_a_generation_is_refused_and_frees_nothing(
    embedded_model_path,
):
    # The session's own thread generates; a close from any other thread is a programming error
    # (WrongThreadError) that frees nothing under the live decode. The owner closes it after.
    with EngineThread("engine") as engine:
        s = engine.call(lambda: Session.open(
            Config(model=str(embedded_model_path), n_predict=2000, n_threads=2)))
        started = threading.Event()
        box = {}

        def work() -> None:
            box["r"] = s.generate(GenerateRequest(text=Q1), on_token=lambda e: started.set())

        engine.submit(work)
        assert started.wait(60)
        with pytest.raises(WrongThreadError, match=r"Session\.close\(\)"):
            s.close()
        s.cancel()  # the one call any thread may make
        assert engine.call(lambda: box["r"]).stop_reason is StopReason.STOPPED
        assert engine.call(lambda: s.generate(GenerateRequest(text=Q2, n_predict=4))).ok
        engine.call(s.close)
        after = engine.call(lambda: s.generate(GenerateRequest(text=Q2)))
        assert not after.ok and "closed" in after.error
