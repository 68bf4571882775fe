"""The replay against the engine it models: a real streamed chat on the tiny synthetic MoE with a
cache that evicts all the time, recorded as routes, written to a trace file, read back, replayed.

The replay's LRU must report the engine's own hit rate (to 0.1 percentage point; it is exact by
construction) and the bytes the engine read; Belady can only do better."""

from __future__ import annotations

import pytest

from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.replay import recorded_hit_pct, replay
from workbench.moe.route_trace import read_trace, write_trace
from workbench.moe.routes import Phase
from workbench.moe.synth import write_synthetic_moe

MIB = 1 << 20


@pytest.fixture(scope="module", params=["qwen3moe", "gemma4"])
def model(request, tmp_path_factory):
    """Two layouts: split gate/up experts, and gemma4's fused ones after a dense first layer."""
    out = tmp_path_factory.mktemp("replay") / f"tiny-{request.param}.gguf"
    return write_synthetic_moe(out, arch=request.param, size="tiny")[0]


@pytest.fixture
def recorded(model):
    config = Config(model=str(model), chat_template=False, n_predict=24, n_ctx=256,
                    n_threads=2, n_batch=8, moe_stream=True, cache_mb=1, o_direct=False)
    session = Session.open(config, record_routes=True)
    try:
        results = [session.generate(GenerateRequest(text=text)) for text in
                   ("The quick brown fox jumps over the lazy dog, twice.", "And then?")]
        yield session, results
    finally:
        session.close()


def test_the_replays_lru_is_the_engines_cache(recorded, tmp_path):
    session, results = recorded
    assert all(r.ok for r in results)
    runtime = session.streaming
    counters = runtime.streamer.counters()
    assert counters.evictions > 0, "the budget must make the cache evict"
    path = write_trace(tmp_path / "run.csv", runtime.route_trace())
    trace = read_trace(path)
    assert trace.meta.cache_budget_bytes == 1 * MIB
    assert trace.meta.expert_bytes == runtime.expert_bytes
    # Prefill chunks of 8 tokens and one decode load per token and MoE layer, in both turns.
    assert {t.turn for t in trace.loads} == {r.summary.turn for r in results}
    decode = [t for t in trace.loads if t.load.phase is Phase.DECODE]
    n_moe = len(runtime.expert_bytes)
    assert len(decode) == n_moe * sum(r.summary.n_generated for r in results)
    loads = [(t.turn, t.load) for t in trace.loads]
    report = replay(loads, trace.meta.expert_bytes, trace.meta.n_expert,
                    trace.meta.n_expert_used, [trace.meta.cache_budget_bytes, 2 * MIB, 6 * MIB])
    lru = report.budgets[0].lru
    assert lru.lookups == counters.lookups
    assert abs(lru.hit_pct - counters.hit_pct) < 0.1
    assert lru.hit_pct == pytest.approx(results[-1].summary.cache_hit_pct, abs=0.1)
    assert lru.miss_bytes == counters.read_bytes  # buffered reads: exactly the missed slices
    for row in report.budgets:
        assert row.belady.hit_pct >= row.lru.hit_pct
        assert row.belady.lookups == row.lru.lookups
    # The native records carry the router's weights: the drop what-ifs run beside static top-k.
    assert report.has_weights
    assert [w.name for w in report.budgets[0].what_ifs] == [
        "drop 0.5", "drop 0.75", "drop 1", "top-k 1"]
    # The residency the engine recorded per slot gives its own hit rate back.
    assert recorded_hit_pct(loads) == pytest.approx(counters.hit_pct, abs=0.1)


def test_the_record_is_bounded_and_kept_per_conversation(tiny_moe_path):
    config = Config(model=str(tiny_moe_path), chat_template=False, n_predict=6, n_ctx=256,
                    n_threads=2, moe_stream=True, cache_mb=2, o_direct=False)
    session = Session.open(config, record_routes=True, max_route_loads=30)
    try:
        a = session.generate(GenerateRequest(text="First conversation.", conversation="a"))
        b = session.generate(GenerateRequest(text="Second one.", conversation="b"))
        recorder = session.streaming.routes
        assert recorder.turns_of("a") == [a.summary.turn] and recorder.turns_of("b") == [
            b.summary.turn]
        kept = recorder.loads()
        assert len(kept) == 30 and recorder.dropped_loads > 0  # the oldest went first
        n_moe = len(session.streaming.expert_bytes)
        # The newest loads are the second answer's tokens, one pass over the MoE layers each.
        tail = kept[-n_moe * b.summary.n_generated:]
        assert all(t == b.summary.turn and ld.phase is Phase.DECODE for t, ld in tail)
        steps = [ld.first_step for _, ld in tail]
        assert steps == sorted(steps) and len(set(steps)) == b.summary.n_generated
        of_a = session.streaming.route_trace(recorder.turns_of("a")).loads
        of_b = [t for t, _ in kept if t == b.summary.turn]
        assert len(of_a) == 30 - len(of_b) and {t.turn for t in of_a} <= {a.summary.turn}
    finally:
        session.close()
