"""Replay policies on small hand-made routings whose answers are worked out by hand, and the route
trace file's round trip and its messages for damaged files."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.moe.replay import (
    Lookup,
    lookups,
    recorded_hit_pct,
    replay,
    replay_belady,
    replay_drop,
    replay_lru,
    replay_top_k,
    token_demand_bytes,
)
from workbench.moe.route_trace import (
    RouteTrace,
    RouteTraceError,
    TraceMeta,
    TurnLoad,
    read_trace,
    write_trace,
)
from workbench.moe.routes import Phase, Residency, RouteLoad


def decode(step: int, experts: list[int], weights: list[float] | None = None, layer: int = 0,
           ) -> RouteLoad:
    e = np.array([experts], dtype=np.int32)
    w = np.array([weights if weights is not None else [np.nan] * len(experts)], np.float32)
    return RouteLoad(layer, Phase.DECODE, step, e, w, np.full(e.shape, Residency.UNKNOWN, np.int8),
                     np.zeros(e.shape, np.bool_))


def one(layer: int, *experts: int, token: int = 0) -> Lookup:
    return Lookup(layer, experts, True, (0, token))


def test_a_cycle_longer_than_the_cache_never_hits_under_lru_and_belady_keeps_what_returns():
    # A B C A B C with room for two: LRU evicts each just before it returns (the cliff);
    # Belady keeps A for load 3, then C for load 5: 2 hits of 6.
    seq = [one(0, e, token=i) for i, e in enumerate([0, 1, 2, 0, 1, 2])]
    lru = replay_lru(seq, {0: 1}, 2)
    belady = replay_belady(seq, {0: 1}, 2)
    assert (lru.lookups, lru.hits, lru.miss_bytes) == (6, 0, 6)
    assert (belady.lookups, belady.hits, belady.miss_bytes) == (6, 2, 4)
    assert belady.decode_tokens == 6
    assert belady.decode_mib_per_token == pytest.approx(4 / 6 / (1 << 20))


def test_a_load_never_evicts_its_own_experts_and_duplicates_are_looked_up_once():
    # Budget 1 entry, a load of two: both stay (over budget for the length of the load); the
    # next load of A hits and only then evicts B, so B misses again.
    prefill = RouteLoad(0, Phase.PREFILL, 0, np.array([[0, 1], [1, 0]], np.int32),
                        np.full((2, 2), np.nan, np.float32), np.full((2, 2), -1, np.int8),
                        np.zeros((2, 2), np.bool_))
    seq = lookups([(0, prefill), (0, decode(2, [0])), (0, decode(3, [1]))])
    assert seq[0].experts == (0, 1)  # four routings, two lookups
    r = replay_lru(seq, {0: 10}, 10)
    assert (r.lookups, r.hits, r.miss_bytes) == (4, 1, 30)
    assert (r.decode_lookups, r.decode_hits, r.decode_miss_bytes) == (2, 1, 10)


def test_layers_are_separate_entries_with_their_own_sizes():
    seq = [one(0, 3), one(1, 3), one(0, 3), one(1, 3)]
    big = replay_lru(seq, {0: 100, 1: 1}, 101)
    assert big.hits == 2
    # 100 bytes of room: layer 0's expert alone fits, so loading layer 1's pushes it out, and
    # vice versa; each entry's own size is what is counted as read.
    small = replay_lru(seq, {0: 100, 1: 1}, 100)
    assert (small.hits, small.miss_bytes) == (0, 202)


ROUTES = [  # one layer, k=2, a budget that keeps everything
    # The turn's first token drops like any other (the engine knows the weight chain from the
    # prompt): expert 1 is cold at 0.3.
    decode(0, [0, 1], [0.7, 0.3]),
    decode(1, [0, 2], [0.8, 0.2]),  # expert 2 is cold
    decode(2, [1, 3], [0.6, 0.4]),  # expert 3 is cold
    decode(3, [0, 1], [0.9, 0.1]),  # expert 1 is low but resident: kept
]


@pytest.mark.parametrize(("frac", "avoided", "mass", "slots"), [
    # thr 0.5: drops 1 (0.3, first token), 2 (0.2) and 3 (0.4); expert 1 is read at the third
    # token, so resident at the fourth: 2 reads of 4 remain; 0.9 of the 4.0 decode weight.
    (1.0, 50.0, 22.5, 37.5),
    (0.5, 25.0, 5.0, 12.5),  # thr 0.25: drops 2 only
])
def test_dropping_skips_only_cold_low_weight_slots(frac, avoided, mass, slots):
    loads = [(0, ld) for ld in ROUTES]
    base = replay_lru(lookups(loads), {0: 1}, 100)
    assert base.decode_miss_bytes == 4
    w = replay_drop(loads, {0: 1}, 100, frac, base)
    assert w.reads_avoided_pct == pytest.approx(avoided)
    assert w.mass_dropped_pct == pytest.approx(mass)
    assert w.slots_dropped_pct == pytest.approx(slots)


def test_static_top_k_cuts_every_tokens_last_slots():
    loads = [(0, ld) for ld in ROUTES]
    base = replay_lru(lookups(loads), {0: 1}, 100)
    w = replay_top_k(loads, {0: 1}, 100, 1, base)
    # Keeping slot 0: experts 0, 0, 1, 0 -> two reads of the four; mass 1.0 of 4.0.
    assert (w.name, w.reads_avoided_pct, w.mass_dropped_pct, w.slots_dropped_pct) == (
        "top-k 1", pytest.approx(50.0), pytest.approx(25.0), pytest.approx(50.0))


def test_the_report_has_every_budget_and_says_when_weights_are_missing():
    weighted = replay([(0, ld) for ld in ROUTES], {0: 1}, 4, 2, [1, 2, 4])
    assert weighted.has_weights
    assert [w.name for w in weighted.budgets[0].what_ifs] == [
        "drop 0.5", "drop 0.75", "drop 1", "top-k 1"]
    assert weighted.token_demand_bytes == 2 and weighted.total_expert_bytes == 4
    for row in weighted.budgets:
        assert row.belady.hit_pct >= row.lru.hit_pct
    bare = replay([(0, decode(s, [s % 3, 3])) for s in range(6)], {0: 1}, 4, 2, [2])
    assert not bare.has_weights
    only = bare.budgets[0].what_ifs
    assert [w.name for w in only] == ["top-k 1"] and np.isnan(only[0].mass_dropped_pct)


def test_token_demand_is_one_tokens_experts_over_every_layer():
    seq = [one(0, 1, 2, token=0), one(1, 5, token=0), one(0, 1, 2, token=1), one(1, 6, token=1)]
    assert token_demand_bytes(seq, {0: 10, 1: 3}) == 23


# ---- the file ---------------------------------------------------------------------------------

META = TraceMeta("m.gguf", "qwen3moe", 2, 4, 2, 1000, {0: 10, 1: 3})


def test_a_trace_reads_back_as_it_was_written(tmp_path):
    prefill = RouteLoad(1, Phase.PREFILL, 0, np.array([[0, 1], [2, 1]], np.int32),
                        np.array([[0.5, 0.25], [0.75, 0.125]], np.float32),
                        np.array([[0, 1], [0, 1]], np.int8), np.array([[0, 0], [0, 1]], np.bool_))
    trace = RouteTrace(META, [TurnLoad(0, prefill), TurnLoad(0, decode(2, [3, 0], [0.6, 0.4])),
                              TurnLoad(0, decode(2, [1, 2], layer=1)),
                              TurnLoad(1, decode(3, [1, 2], layer=1))])
    path = write_trace(tmp_path / "t.csv", trace)
    text = path.read_text().splitlines()
    assert text[0] == "# workbench_route_trace v1"
    assert text[3] == "# layer=1 expert_bytes=3"
    # The first miss of expert 0 reads its bytes; a hit and a dropped miss read none.
    assert text[5:9] == ["0,0,0,1,0,0,0.5,0,3,0", "0,0,0,1,1,1,0.25,1,0,0",
                         "0,0,1,1,0,2,0.75,0,3,0", "0,0,1,1,1,1,0.125,1,0,1"]
    back = read_trace(path)
    assert back.meta == META
    assert_same_loads(trace, back)


def assert_same_loads(a_trace: RouteTrace, b_trace: RouteTrace) -> None:
    """The two traces hold the same loads, field for field."""
    assert len(b_trace.loads) == len(a_trace.loads)
    for a, b in zip(a_trace.loads, b_trace.loads, strict=True):
        assert (a.turn, a.load.layer, a.load.phase, a.load.first_step) == (
            b.turn, b.load.layer, b.load.phase, b.load.first_step)
        for name in ("experts", "weights", "residency", "dropped"):
            np.testing.assert_array_equal(getattr(a.load, name), getattr(b.load, name))


def row6(text: str):
    """Damage: the first data row (line 6) replaced by `text`."""
    return lambda lines: [*lines[:5], text, *lines[6:]]


@pytest.mark.parametrize(("damage", "message"), [
    (lambda lines: ["hello", *lines[1:]], r"line 1: not a route trace"),
    (lambda lines: lines[:1] + lines[2:], r"line 2: the run line"),
    (row6("0,1,2,0,0"), r"line 6: 5 columns"),
    (row6("0,1,2,0,1,3,nan,-1,-1,0"), r"line 6: slot 1"),
    (row6("0,1,2,0,0,9,nan,-1,-1,0"), r"line 6: expert 9"),
    (row6("0,1,2,7,0,1,nan,-1,-1,0"), r"line 6: layer 7"),
    (row6("0,1,x,0,0,1,nan,-1,-1,0"), r"line 6: step"),
    (row6("0,1,2,0,0,1,heavy,-1,-1,0"), r"line 6: weight"),
])
def test_a_damaged_trace_names_the_line(tmp_path, damage, message):
    path = write_trace(tmp_path / "t.csv", RouteTrace(META, [TurnLoad(0, decode(2, [3, 0]))]))
    path.write_text("\n".join(damage(path.read_text().splitlines())) + "\n")
    with pytest.raises(RouteTraceError, match=message):
        read_trace(path)


def test_a_missing_trace_says_how_to_record_one(tmp_path):
    with pytest.raises(RouteTraceError, match="--route-trace"):
        read_trace(tmp_path / "nope.csv")


def test_prefill_batches_of_a_single_moe_layer_read_back_as_their_loads(tmp_path):
    # One MoE layer: the layer never changes between loads. Two ubatches of one chunk (the same
    # first step) and a next chunk whose load routes another number of experts stay apart.
    def batch(step: int, experts: list[int]) -> TurnLoad:
        e = np.array([experts], np.int32)
        return TurnLoad(0, RouteLoad(0, Phase.PREFILL, step, e, np.full(e.shape, np.nan,
                                     np.float32), np.full(e.shape, -1, np.int8),
                                     np.zeros(e.shape, np.bool_)))

    meta = TraceMeta("m.gguf", "qwen3moe", 1, 4, 2, -1, {0: 10})
    loads = [batch(0, [0, 1, 2]), batch(0, [3, 1, 0]), batch(8, [2, 3])]
    back = read_trace(write_trace(tmp_path / "t.csv", RouteTrace(meta, loads)))
    assert [t.load.experts.tolist() for t in back.loads] == [[[0, 1, 2]], [[3, 1, 0]], [[2, 3]]]
    assert [t.load.first_step for t in back.loads] == [0, 0, 8]
    assert back.meta.cache_budget_bytes == -1


def test_the_hit_rate_the_engine_recorded_counts_each_distinct_kept_expert_once():
    def load(experts, residency, dropped):
        e = np.array(experts, np.int32)
        return 0, RouteLoad(0, Phase.PREFILL, 0, e, np.full(e.shape, np.nan, np.float32),
                            np.array(residency, np.int8), np.array(dropped, np.bool_))

    # Expert 1 twice (one lookup), expert 2 dropped (none): lookups 0 (miss), 1 (hit), 3 (hit).
    loads = [load([[0, 1], [1, 2], [3, 0]], [[0, 1], [1, 0], [1, 0]],
                  [[0, 0], [0, 1], [0, 0]])]
    assert recorded_hit_pct(loads) == pytest.approx(200 / 3)
    assert recorded_hit_pct([(0, decode(1, [0, 1]))]) == -1.0  # residency unknown


def scored(load: RouteLoad, seed: int) -> RouteLoad:
    """`load` with a score row per token: awkward float32 values, and a NaN row (not readable)."""
    rows = np.random.default_rng(seed).standard_normal((load.n_tokens, META.n_expert))
    rows = rows.astype(np.float32) * np.float32(3.3333333)
    rows[-1, :] = np.nan if load.n_tokens > 1 else rows[-1, :]
    return RouteLoad(load.layer, load.phase, load.first_step, load.experts, load.weights,
                     load.residency, load.dropped, rows)


def test_score_rows_read_back_bit_for_bit_and_other_readers_skip_them(tmp_path):
    prefill = RouteLoad(1, Phase.PREFILL, 0, np.array([[0, 1], [2, 1]], np.int32),
                        np.array([[0.5, 0.25], [0.75, 0.125]], np.float32),
                        np.array([[0, 1], [0, 1]], np.int8), np.zeros((2, 2), np.bool_))
    loads = [TurnLoad(0, scored(prefill, 1)), TurnLoad(0, scored(decode(2, [3, 0]), 2)),
             TurnLoad(1, decode(3, [1, 2], layer=1))]  # a load without rows stays without
    path = write_trace(tmp_path / "t.csv", RouteTrace(META, loads))
    back = read_trace(path)
    assert_same_loads(RouteTrace(META, loads), back)
    for a, b in zip(loads, back.loads, strict=True):
        if a.load.scores is None:
            assert b.load.scores is None
        else:  # exact: the replay must see the engine's float32 row, NaN where unreadable
            assert b.load.scores is not None
            np.testing.assert_array_equal(a.load.scores, b.load.scores)
    # A reader that skips comment lines (as upstream's tools do) sees the plain trace.
    plain = write_trace(tmp_path / "plain.csv", RouteTrace(META, [
        TurnLoad(t.turn, RouteLoad(t.load.layer, t.load.phase, t.load.first_step, t.load.experts,
                                   t.load.weights, t.load.residency, t.load.dropped))
        for t in loads]))
    def rows(p):
        return [ln for ln in p.read_text().splitlines() if not ln.startswith("#")]

    assert rows(path) == rows(plain)


@pytest.mark.parametrize(("damage", "message"), [
    # A row of the wrong width, a line for a token the load does not have, one before any row.
    (lambda ln: [x.rsplit(";", 1)[0] if x.startswith("# scores") else x for x in ln],
     "one number"),
    (lambda ln: [x.replace("row=0", "row=5") for x in ln], "does not follow"),
    (lambda ln: [*ln[:5], next(x for x in ln if x.startswith("# scores")), *ln[5:]],
     "before any row"),
    (lambda ln: [x.replace("values=", "values=oops") for x in ln], "one number"),
])
def test_a_damaged_score_line_names_the_line(tmp_path, damage, message):
    path = write_trace(tmp_path / "t.csv",
                       RouteTrace(META, [TurnLoad(0, scored(decode(2, [3, 0]), 3))]))
    path.write_text("\n".join(damage(path.read_text().splitlines())) + "\n")
    with pytest.raises(RouteTraceError, match=message):
        read_trace(path)
