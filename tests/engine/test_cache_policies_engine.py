"""Every cache policy of the native streamer against its replay (moe/cache_policies.py): a real
streamed chat on the tiny synthetic MoE, recorded, written to a trace file, read back and
replayed. The replay must give the engine's lookups, hits and bytes read exactly, for each
policy, with the token-cycle guard, and from a warm start."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.cache_policies import POLICIES, PolicyCache, replay_policy
from workbench.moe.replay import lookups, replay_lru
from workbench.moe.route_trace import read_trace, write_trace

MIB = 1 << 20
PROMPTS = ("The quick brown fox jumps over the lazy dog, twice.", "And then?")


def _run(model, tmp_path, *, policy: str, guard: bool = False, cache_mb: int = 2,
         warm_dir=None, n_predict: int = 12, prefetch: bool = False):
    config = Config(model=str(model), chat_template=False, n_predict=n_predict, n_ctx=256,
                    n_threads=2, n_batch=8, moe_stream=True, cache_mb=cache_mb, o_direct=False,
                    cache_policy=policy, cache_guard=guard, prefetch=prefetch)
    session = Session.open(config, record_routes=True, warm_dir=warm_dir)
    try:
        results = [session.generate(GenerateRequest(text=text)) for text in PROMPTS]
        assert all(r.ok for r in results)
        runtime = session.streaming
        counters = runtime.streamer.counters()
        stats = runtime.streamer.cache_stats()
        path = write_trace(tmp_path / f"{policy}-{guard}-{prefetch}.csv", runtime.route_trace())
        texts = [r.text for r in results]
        return counters, stats, read_trace(path), runtime.token_demand_bytes, texts
    finally:
        session.close()


def _cache(trace) -> PolicyCache:
    meta = trace.meta
    cache = PolicyCache(meta.cache_policy, meta.expert_bytes, meta.cache_budget_bytes,
                        guard=meta.cache_guard, prefetch=meta.prefetch)
    cache.preload(meta.preloaded)
    for lk in lookups([(t.turn, t.load) for t in trace.loads]):
        cache.step(lk)
    return cache


def _replay(trace):
    return _cache(trace).result


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_is_its_replay(tiny_moe_path, tmp_path, policy):
    counters, stats, trace, _, _ = _run(tiny_moe_path, tmp_path, policy=policy)
    assert counters.evictions > 0, "the budget must make the cache evict"
    assert trace.meta.cache_policy == policy and stats.policy == POLICIES.index(policy)
    result = _replay(trace)
    assert result.lookups == counters.lookups
    assert result.hits == counters.hits
    assert result.miss_bytes == counters.read_bytes  # buffered reads: exactly the missed slices
    if policy == "lru":  # the generic frame's LRU is the historical replay's
        seq = lookups([(t.turn, t.load) for t in trace.loads])
        old = replay_lru(seq, trace.meta.expert_bytes, trace.meta.cache_budget_bytes)
        assert (old.hits, old.miss_bytes) == (result.hits, result.miss_bytes)


def test_the_policies_differ(tiny_moe_path, tmp_path):
    """A replay that ignored the policy would pass the test above for all three; the engine's
    hit counts must differ between them on the same text."""
    hits = {p: _run(tiny_moe_path, tmp_path, policy=p)[0].hits for p in POLICIES}
    assert len(set(hits.values())) == len(POLICIES), hits


def test_the_guard_keeps_hits_below_the_cliff(tiny_moe_path, tmp_path):
    # One token's expert demand is above 1 MiB on the tiny model: LRU cycles everything.
    plain, _, _, demand, _ = _run(tiny_moe_path, tmp_path, policy="lru", cache_mb=1)
    assert demand > 1 * MIB
    guarded, stats, trace, _, _ = _run(tiny_moe_path, tmp_path, policy="lru", guard=True,
                                    cache_mb=1)
    assert stats.guard and stats.transient_admissions > 0
    assert guarded.hits > plain.hits
    result = _replay(trace)
    assert (result.lookups, result.hits, result.miss_bytes) == (
        guarded.lookups, guarded.hits, guarded.read_bytes)
    # The replay honours the flag: the same trace replayed without the guard is the plain LRU.
    unguarded = replay_policy(lookups([(t.turn, t.load) for t in trace.loads]),
                              trace.meta.expert_bytes, trace.meta.cache_budget_bytes, "lru")
    assert unguarded.hits < result.hits


def test_warm_start_preloads_and_replays(tiny_moe_path, tmp_path):
    warm = tmp_path / "routing"
    cold, cold_stats, cold_trace, _, _ = _run(tiny_moe_path, tmp_path, policy="lfru", warm_dir=warm)
    assert cold_stats.preloaded_entries == 0 and not cold_trace.meta.preloaded
    saved = list(warm.glob("*.npy"))
    assert len(saved) == 1
    counts = np.load(saved[0])
    assert counts.sum() > 0
    hot, stats, trace, _, _ = _run(tiny_moe_path, tmp_path, policy="lfru", warm_dir=warm)
    assert stats.preloaded_entries > 0
    assert len(trace.meta.preloaded) == stats.preloaded_entries
    assert stats.preloaded_bytes <= trace.meta.cache_budget_bytes
    assert hot.hits > cold.hits  # the same text, its experts already in the cache
    result = _replay(trace)
    assert (result.lookups, result.hits, result.miss_bytes) == (
        hot.lookups, hot.hits, hot.read_bytes)
    # Turned off, the saved file is read but nothing is preloaded.
    config = Config(model=str(tiny_moe_path), chat_template=False, n_ctx=256, n_threads=2,
                    n_predict=8, moe_stream=True, cache_mb=2, o_direct=False,
                    cache_warm_start=False)
    with Session.open(config, warm_dir=warm) as s:
        assert s.streaming.streamer.cache_stats().preloaded_entries == 0


def test_a_damaged_frequency_file_starts_cold_with_a_warning(tiny_moe_path, tmp_path):
    warm = tmp_path / "routing"
    _run(tiny_moe_path, tmp_path, policy="lru", warm_dir=warm)
    (saved,) = warm.glob("*.npy")
    saved.write_bytes(b"not a numpy file")
    config = Config(model=str(tiny_moe_path), chat_template=False, n_ctx=256, n_threads=2,
                    n_predict=8, moe_stream=True, cache_mb=2, o_direct=False)
    with Session.open(config, warm_dir=warm) as s:
        assert s.streaming.streamer.cache_stats().preloaded_entries == 0
        assert any("damaged" in w for w in s.streaming.warnings)
        s.generate(GenerateRequest(text="Hello there.", n_predict=4))
    assert np.load(saved).sum() > 0  # rewritten whole at close


@pytest.mark.parametrize("policy", ["lru", "lfru"])
def test_prefetch_is_its_replay_and_changes_no_output(tiny_moe_path, tmp_path, policy):
    _, _, _, _, off_texts = _run(tiny_moe_path, tmp_path, policy=policy, cache_mb=1,
                                 guard=True)
    on, stats, trace, _, on_texts = _run(tiny_moe_path, tmp_path, policy=policy, cache_mb=1,
                                         guard=True, prefetch=True)
    assert stats.prefetch and trace.meta.prefetch
    assert on_texts == off_texts  # lossless: the same answers, read ahead or not
    assert stats.prefetch_issued > 0 and stats.prefetch_hits > 0
    cache = _cache(trace)
    assert (cache.result.lookups, cache.result.hits, cache.result.miss_bytes) == (
        on.lookups, on.hits, on.read_bytes)
    assert (cache.prefetch_issued, cache.prefetch_hits) == (stats.prefetch_issued,
                                                            stats.prefetch_hits)
    entry = next(iter(trace.meta.expert_bytes.values()))
    assert stats.prefetch_wasted_bytes == cache.prefetch_wasted * entry
    assert stats.prefetch_bytes == stats.prefetch_issued * entry  # buffered: exact slices
