"""The policy replay (moe/cache_policies.py) on hand-made load sequences, the trace's policy line
and the warm-start file: no model needed."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from workbench.config import BY_NAME, CACHE_POLICIES
from workbench.engine.warm_start import load_frequencies, preload_order, save_frequencies
from workbench.moe.cache_policies import POLICIES, PolicyCache, replay_policy
from workbench.moe.replay import Lookup, replay_lru
from workbench.moe.route_trace import (
    RouteTrace,
    RouteTraceError,
    TraceMeta,
    read_trace,
    write_trace,
)
from workbench.moe.streamer import POLICY_CODES

SIZE = 10
BYTES = {0: SIZE, 1: SIZE, 2: SIZE}


def _token(step: int, experts: dict[int, tuple[int, ...]]) -> list[Lookup]:
    return [Lookup(il, experts[il], True, (0, step)) for il in sorted(experts)]


def _cycle(tokens: int) -> list[Lookup]:
    """Every token routes the same two experts per layer: 6 entries, a cycle of 60 bytes."""
    return [lk for t in range(tokens) for lk in _token(t, {0: (1, 2), 1: (3, 4), 2: (5, 6)})]


def test_lru_hits_nothing_below_the_cycle_and_the_guard_pins_a_subset():
    seq = _cycle(20)
    # Four entries hold the two layers just run: the next layer's were always evicted.
    assert replay_policy(seq, BYTES, 40, "lru").hits == 0  # the cliff
    guarded = replay_policy(seq, BYTES, 40, "lru", guard=True)
    # The first pass closes with layers 1 and 2 resident; from then on they stay pinned and
    # layer 0 passes through as transient entries: 4 hits in each of the 19 later tokens.
    assert guarded.hits == 4 * 19
    assert replay_policy(seq, BYTES, 60, "lru").hits == 6 * 19  # the cycle fits: all but token 0


def test_the_generic_lru_is_the_historical_replay():
    rng = np.random.default_rng(1)
    seq = [lk for t in range(40) for lk in _token(
        t, {il: tuple(int(e) for e in rng.choice(16, 3, replace=False)) for il in range(3)})]
    for budget in (30, 90, 200):
        old = replay_lru(seq, BYTES, budget)
        new = replay_policy(seq, BYTES, budget, "lru")
        assert (old.hits, old.lookups, old.miss_bytes) == (new.hits, new.lookups, new.miss_bytes)


def test_lfru_keeps_a_hot_expert_that_lru_evicts():
    """Layer 0 routes expert 0 every token and one new expert each token; a 2-entry budget.
    LRU evicts expert 0 whenever two newer ones came after it; LFRU keeps the frequent one."""
    bytes_ = {0: SIZE}
    seq = []
    for t in range(30):
        seq.append(Lookup(0, (0,), True, (0, 2 * t)))
        seq.append(Lookup(0, (100 + 2 * t,), True, (0, 2 * t + 1)))
        seq.append(Lookup(0, (101 + 2 * t,), True, (0, 2 * t + 1)))
    lru = replay_policy(seq, bytes_, 2 * SIZE, "lru")
    lfru = replay_policy(seq, bytes_, 2 * SIZE, "lfru")
    assert lru.hits == 0
    assert lfru.hits == 28  # from the third token: it had to be seen twice to outweigh a new one


def test_layer_aware_prefers_the_next_layer():
    """Equal scores: the layer-aware key evicts the entry whose layer comes round last."""
    cache = PolicyCache("layer", BYTES, 2 * SIZE)
    for lk in (Lookup(0, (1,), True, (0, 0)), Lookup(1, (2,), True, (0, 0)),
               Lookup(2, (3,), True, (0, 0))):
        cache.step(lk)
    # After layer 2's load: layer 0 comes next (staleness 1), layer 1 last (staleness 2).
    assert cache.resident(0, 1) and not cache.resident(1, 2) and cache.resident(2, 3)
    lru = PolicyCache("lru", BYTES, 2 * SIZE)
    for lk in (Lookup(0, (1,), True, (0, 0)), Lookup(1, (2,), True, (0, 0)),
               Lookup(2, (3,), True, (0, 0))):
        lru.step(lk)
    assert not lru.resident(0, 1) and lru.resident(1, 2)


def test_preload_fills_in_order_within_the_budget():
    cache = PolicyCache("lru", BYTES, 25)
    assert cache.preload([(0, 1), (9, 9), (1, 2), (2, 3)]) == 2  # layer 9 is not managed
    assert cache.resident(0, 1) and cache.resident(1, 2) and not cache.resident(2, 3)
    cache.step(Lookup(0, (1,), True, (0, 0)))
    assert cache.result.hits == 1


def test_prefetch_reads_the_previous_tokens_next_layer():
    seq = _cycle(3)
    cache = PolicyCache("lru", BYTES, 30, prefetch=True)
    for lk in seq:
        cache.step(lk)
    plain = replay_policy(seq, BYTES, 30, "lru")
    assert cache.prefetch_issued > 0 and cache.prefetch_hits > 0
    assert cache.result.hits == plain.hits + cache.prefetch_hits


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="unknown cache policy 'mru'"):
        PolicyCache("mru", BYTES, 10)


def test_the_policy_line_round_trips_and_a_bad_one_is_refused(tmp_path):
    meta = TraceMeta(model="m.gguf", arch="qwen3moe", n_layer=3, n_expert=8, n_expert_used=2,
                     cache_budget_bytes=100, expert_bytes=dict(BYTES), cache_policy="layer",
                     cache_guard=True, preloaded=((0, 1), (2, 7)), prefetch=True)
    path = write_trace(tmp_path / "t.csv", RouteTrace(meta))
    back = read_trace(path).meta
    assert (back.cache_policy, back.cache_guard, back.preloaded, back.prefetch) == (
        "layer", True, ((0, 1), (2, 7)), True)
    text = path.read_text().replace("cache_policy=layer", "cache_policy=mru")
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(RouteTraceError, match="line 6: cache_policy 'mru'"):
        read_trace(tmp_path / "bad.csv")


def test_frequencies_round_trip_and_a_damaged_file_starts_cold(tmp_path):
    path = tmp_path / "routing" / "m.npy"
    counts = np.zeros((3, 4), dtype=np.uint32)
    counts[1, 2], counts[0, 3] = 5, 2
    save_frequencies(path, counts, None)
    back, note = load_frequencies(path, (3, 4))
    assert note == "" and back is not None and back[1, 2] == 5
    save_frequencies(path, counts, back)  # the earlier session's counts weigh half
    again, _ = load_frequencies(path, (3, 4))
    assert again[1, 2] == 7.5
    assert preload_order(again, np.array([4, 4, 0])) == [(1, 2), (0, 3)]
    assert load_frequencies(path, (2, 4))[0] is None  # another model's shape
    path.write_bytes(b"garbage")
    missing, note = load_frequencies(path, (3, 4))
    assert missing is None and "damaged" in note
    assert load_frequencies(tmp_path / "none.npy", (3, 4)) == (None, "")


# ---- one declaration of the policies (config.CACHE_POLICIES) against the native enum ---------

NATIVE_POLICY_HEADER = Path(__file__).resolve().parents[2] / "native" / "src" / "cache_policy.h"


def native_policies(header: str) -> dict[str, int]:
    """The CachePolicy enum's entries, lower-cased name -> code, as the header declares them;
    and the range cache_policy_from accepts must be exactly those codes."""
    body = re.search(r"enum class CachePolicy\s*:\s*\w+\s*\{(.*?)\};", header, re.S)
    assert body is not None, "no `enum class CachePolicy` in the header"
    entries = {name.lower(): int(code)
               for name, code in re.findall(r"^\s*(\w+)\s*=\s*(\d+)\s*,", body.group(1), re.M)}
    top = re.search(r"value < 0 \|\| value > (\d+)", header)
    assert top is not None, "no range check in cache_policy_from"
    assert sorted(entries.values()) == list(range(int(top.group(1)) + 1)), (entries, top.group(0))
    return entries


def test_the_native_enum_is_the_declared_policy_list():
    declared = {name: code for code, name in enumerate(CACHE_POLICIES)}
    assert native_policies(NATIVE_POLICY_HEADER.read_text()) == declared
    # Everything on the Python side is derived from the one declaration.
    assert POLICIES == tuple(CACHE_POLICIES) == BY_NAME["cache_policy"].choices
    assert declared == POLICY_CODES


def test_a_drifted_native_enum_is_caught():
    """Negative control: a header with a policy added or renumbered no longer matches."""
    header = NATIVE_POLICY_HEADER.read_text()
    declared = {name: code for code, name in enumerate(CACHE_POLICIES)}
    added = header.replace("Layer = 2,", "Layer = 2,\n    Belady = 3,").replace(
        "value > 2", "value > 3")
    assert native_policies(added) != declared
    swapped = header.replace("Lfru = 1,", "Lfru = 2,").replace("Layer = 2,", "Layer = 1,")
    assert native_policies(swapped) != declared
    with pytest.raises(AssertionError):  # the range check left behind the enum
        native_policies(header.replace("Layer = 2,", "Layer = 2,\n    Belady = 3,"))
