"""Gates for cache-aware expert dropping (G8a, G8a', G8b, G8c) and its negative controls.

Dropping is lossy by design, so its gates prove the machinery instead: a threshold no weight
can fall below changes nothing (bit for bit, while every routing is examined), the engine never
reads an expert it did not load (a poison guard that fails when ids are not repointed), at top-k
1 dropping cannot act, and at full strength it does change the logits of the gate model. Every
run streams through a cache that evicts on every token (cache_mb 2: one token's ~1.5 MiB of
demand fits, as dropping requires, but not the 6 MiB of experts), so dropped slots are real
misses and the id repointing is exercised; n_ubatch 1 makes the prompt
a run of one-token graphs, so dropping in prefill and terminal learning see many graphs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest

from tests.gates.gate_runs import PROMPT as PROMPT_TEXT
from tests.gates.gate_runs import Run, assert_identical, gate_config, generate, recorded
from tests.gates.test_streaming_gates import model
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.routes import Phase, Residency, RouteLoad, looked_up
from workbench.moe.streamer import (
    DEBUG_LOST_TERMINAL,
    DEBUG_NO_REPOINT,
    DEBUG_POISON_UNLOADED,
    ExpertStreamer,
)

__all__ = ["model"]  # the module-scoped fixture of the byte-identity gates, reused here

EVICTING = {"moe_stream": True, "cache_mb": 2, "o_direct": False}


@pytest.fixture
def run(run: Callable[..., Run]) -> Callable[..., Run]:
    """tests/gates/conftest.py's runs at n_ubatch 1 unless a test asks otherwise (see above)."""
    return functools.partial(run, n_ubatch=1)


def _counters(r: Run):
    return r.session.streaming.streamer.counters()


def test_g8a_a_threshold_below_any_weight_is_bit_identical_and_examines_every_routing(model, run):
    resident = run(model)
    undropped = run(model, **EVICTING)
    armed = run(model, drop_cold_frac=1e-6, drop_prefill=True, **EVICTING)
    assert_identical(resident, armed)
    assert_identical(undropped, armed)
    c = _counters(armed)
    # G8a': the policy really looked (prefill included), and dropped nothing.
    assert c.experts_routed == c.routed > 0
    assert c.experts_dropped == 0 and c.decode_dropped_weight == 0.0 and c.decode_weight > 0
    assert c.evictions > 0  # the cache really evicted, so misses were on the table


def test_g8c_at_top_k_1_dropping_is_a_no_op(model, run):
    undropped = run(model, n_expert_used=1, **EVICTING)
    dropped = run(model, n_expert_used=1, drop_cold_frac=1.0, drop_prefill=True, **EVICTING)
    assert_identical(undropped, dropped)
    c = _counters(dropped)
    assert c.experts_routed > 0 and c.experts_dropped == 0  # the top expert is never dropped


def test_full_strength_dropping_changes_the_logits_of_the_gate_model(model, run):
    undropped = run(model, **EVICTING)
    dropped = run(model, drop_cold_frac=1.0, drop_prefill=True, **EVICTING)
    assert _counters(dropped).experts_dropped > 0
    with pytest.raises(AssertionError, match="logits differ"):
        assert_identical(undropped, dropped)


def _finite(r: Run) -> bool:
    return all(np.isfinite(x).all() for x in r.logits)


def test_g8b_full_strength_never_touches_an_unloaded_expert(model, run, monkeypatch):
    # The guard: every expert slice not in the cache holds 0xFF bytes, a NaN in every float and
    # in every quantised block's scale, so a read of one makes NaN logits (NaN x weight 0 is NaN).
    monkeypatch.setattr(ExpertStreamer, "debug_flags", DEBUG_POISON_UNLOADED)
    poisoned_plain = run(model, **EVICTING)
    assert_identical(run(model), poisoned_plain)  # loads overwrite the poison completely
    dropped = run(model, drop_cold_frac=1.0, drop_prefill=True, **EVICTING)
    assert _counters(dropped).experts_dropped > 0
    assert _finite(dropped), "a dropped slot read an expert slice that was never loaded"


def test_g8b_guard_fails_when_dropped_ids_are_not_repointed(model, run, monkeypatch):
    # The control that shows the guard can fail: dropped slots keep their id but are not loaded.
    monkeypatch.setattr(ExpertStreamer, "debug_flags",
                        DEBUG_POISON_UNLOADED | DEBUG_NO_REPOINT)
    broken = run(model, drop_cold_frac=1.0, drop_prefill=True, **EVICTING)
    assert _counters(broken).experts_dropped > 0
    assert not _finite(broken)


def test_a_learned_terminal_that_never_appears_loads_the_layer_late_and_undropped(
        model, run, monkeypatch):
    # Every layer learns a terminal no graph has: its load waits for a node that never comes and
    # must happen at the ask of its first expert matmul instead (undropped, before it runs). A
    # missed load would read poisoned slices (NaN) or zero pages, not these logits.
    undropped = run(model, **EVICTING)
    monkeypatch.setattr(ExpertStreamer, "debug_flags",
                        DEBUG_POISON_UNLOADED | DEBUG_LOST_TERMINAL)
    lost = run(model, drop_cold_frac=1.0, drop_prefill=True, **EVICTING)
    assert_identical(undropped, lost)
    c = _counters(lost)
    assert c.experts_routed > 0 and c.experts_dropped == 0
    assert c.decode_dropped_weight == 0.0  # no row ever reached the drop rule


def test_dropping_is_off_in_prefill_unless_asked(model, run):
    r = run(model, record_routes=True, drop_cold_frac=1.0, **EVICTING)
    loads = recorded(r.session)
    prefill = [x for x in loads if x.phase == Phase.PREFILL]
    decode = [x for x in loads if x.phase == Phase.DECODE]
    assert prefill and decode
    assert not any(x.dropped.any() for x in prefill)
    assert sum(int(x.dropped.sum()) for x in decode) == _counters(r).experts_dropped > 0


def test_route_records_carry_weights_residency_and_drops_consistent_with_the_rule(model, run):
    frac = 1.0
    r = run(model, record_routes=True, drop_cold_frac=frac, drop_prefill=True, **EVICTING)
    loads = recorded(r.session)
    # The session's recorder drained the streamer after every decode: taking clears.
    assert loads and r.session.streaming.streamer.take_routes() == []
    n_layers = len({x.layer for x in loads})
    assert len(loads) % n_layers == 0
    dropped_total = 0
    for x in loads:
        assert x.experts.shape == x.weights.shape == x.residency.shape == x.dropped.shape
        # n_ubatch 1: every graph is one token; the last layer of a prompt token whose logits
        # nobody reads routes none (llama.cpp keeps only output rows there), a load of 0 tokens.
        assert x.n_tokens == 1 or (x.n_tokens == 0 and x.phase == Phase.PREFILL)
        assert np.isfinite(x.weights).all()  # the weight node was read on every load
        assert set(np.unique(x.residency)) <= {Residency.MISS, Residency.HIT}
        for w, res, drop in zip(x.weights, x.residency, x.dropped, strict=True):
            top = int(np.argmax(w))
            assert not drop[top]
            # Dropped slots are exactly the rule's: a miss weighted below frac / k. (Rows of a
            # layer whose terminal was still being learned are examined by nobody: none drop.)
            for j in np.flatnonzero(drop):
                assert res[j] == Residency.MISS and w[j] < frac / x.top_k
        dropped_total += int(x.dropped.sum())
    assert dropped_total == _counters(r).experts_dropped > 0


def test_multi_token_batches_drop_by_the_rule_and_never_touch_an_unloaded_expert(
        model, monkeypatch):
    # Prefill micro-batches of 4 tokens: the weight nodes are [1, k, 4] and the ids a strided
    # view, so the per-row gather, the edit and the repointing are exercised across rows. The
    # second turn's prompt is dropped (the terminals were learned in the first).
    monkeypatch.setattr(ExpertStreamer, "debug_flags", DEBUG_POISON_UNLOADED)
    config = gate_config(model, drop_cold_frac=1.0, drop_prefill=True, n_batch=8, n_ubatch=4,
                     **EVICTING)
    with Session.open(config, record_routes=True) as s:
        first = generate(s)
        second = generate(s, " And then the second turn continues with more words")
        loads = recorded(s)
        c = s.streaming.streamer.counters()
    assert _finite(first) and _finite(second)
    wide = [x for x in loads if x.phase == Phase.PREFILL and x.n_tokens > 1]
    assert wide and any(x.dropped.any() for x in wide)
    for x in loads:
        for w, res, drop in zip(x.weights, x.residency, x.dropped, strict=True):
            assert not drop[int(np.argmax(w))]
            assert all(res[j] == Residency.MISS and w[j] < 1.0 / x.top_k
                       for j in np.flatnonzero(drop))
    assert sum(int(x.dropped.sum()) for x in loads) == c.experts_dropped


def test_route_records_carry_the_context_position_of_their_tokens(model, monkeypatch):
    config = gate_config(model, n_batch=8, n_ubatch=4, **EVICTING)
    loads: list[RouteLoad] = []
    with Session.open(config, record_routes=True) as s:
        # Kept as the streamer gives them: the session's recorder fills in a position the native
        # side left unknown, which would hide a decode the streamer failed to attribute.
        take = s.streaming.streamer.take_routes

        def tee() -> list[RouteLoad]:
            taken = take()
            loads.extend(taken)
            return taken

        monkeypatch.setattr(s.streaming.streamer, "take_routes", tee)
        result = s.generate(GenerateRequest(text=PROMPT_TEXT))
    n_prompt, n_gen = result.summary.n_prompt, result.summary.n_generated
    first_layer, last_layer = min(x.layer for x in loads), max(x.layer for x in loads)
    prefill = [x for x in loads if x.layer == first_layer and x.phase == Phase.PREFILL]
    # Every prompt token once, in 4-token compute batches at their positions.
    assert [x.first_step for x in prefill] == list(range(0, n_prompt, 4))
    assert sum(x.n_tokens for x in prefill) == n_prompt
    decode = [x for x in loads if x.layer == first_layer and x.phase == Phase.DECODE]
    assert [x.first_step for x in decode] == list(range(n_prompt, n_prompt + n_gen))
    # A layer may route fewer rows than its batch (qwen3moe's last layer keeps only the rows
    # whose logits are read): those are the batch's final positions. Every layer routes the
    # prompt's final token at its position.
    batch = None
    for x in loads:
        if x.layer == first_layer:
            batch = (x.first_step, x.n_tokens)
        elif x.n_tokens:
            assert batch is not None and x.first_step == batch[0] + batch[1] - x.n_tokens
        else:
            assert x.first_step == -1
    for layer in {x.layer for x in loads}:
        mine = [x for x in loads if x.layer == layer and x.phase == Phase.PREFILL and x.n_tokens]
        assert mine[-1].first_step + mine[-1].n_tokens == n_prompt
    if any(x.layer == last_layer and x.n_tokens == 0 for x in loads):  # rows were pruned
        assert max(x.n_tokens for x in loads if x.layer == last_layer) == 1


def test_residency_in_the_records_matches_the_cache_counters(model, run):
    r = run(model, record_routes=True, **EVICTING)
    loads = recorded(r.session)
    c = _counters(r)
    # Each load looks every distinct expert up once: hits are its distinct experts found resident.
    hits = lookups = 0
    for x in loads:
        first = {}
        for e, res in zip(x.experts.reshape(-1), x.residency.reshape(-1), strict=True):
            first.setdefault(int(e), int(res))
        lookups += len(first)
        hits += sum(1 for v in first.values() if v == Residency.HIT)
    assert (lookups, hits) == (c.lookups, c.hits)
    assert all(np.isfinite(x.weights).all() for x in loads)  # recording reads the weights too


def test_an_lru_replay_of_the_dropped_run_matches_the_engine(model, run):
    # What the cache looked up is derived from the route records (a dropped slot looked up as its
    # row's top expert); an independent LRU over it must see what the engine's cache counted.
    from tests.gates.lru_replay import replay_lru

    r = run(model, record_routes=True, drop_cold_frac=1.0, drop_prefill=True, **EVICTING)
    runtime = r.session.streaming
    loads = looked_up(recorded(r.session))
    entry_bytes: dict[int, int] = {}
    for t in runtime.experts:
        entry_bytes[t.layer] = entry_bytes.get(t.layer, 0) + t.expert_stride
    steps = list(replay_lru(loads, entry_bytes, EVICTING["cache_mb"] << 20))
    c = runtime.streamer.counters()
    assert c.experts_dropped > 0
    assert (c.lookups, c.hits) == (sum(s.lookups for s in steps), sum(s.hits for s in steps))
    assert c.read_bytes == c.requested_bytes == sum(s.missed_bytes for s in steps)


def test_validate_refuses_dropping_without_the_cache(model):
    from workbench.engine.requests import SessionError

    with pytest.raises(SessionError, match="expert cache is off"):
        Session.open(gate_config(model, moe_stream=True, drop_cold_frac=0.5))


def test_open_warns_about_dropping_at_a_small_top_k(model):
    with Session.open(gate_config(model, moe_stream=True, cache_mb=64,
                              drop_cold_frac=0.75)) as s:
        assert any("Dropping cold experts at 75% with top-k 2" in w for w in s.warnings)
        s.generate(GenerateRequest(text="Hi"))


@pytest.mark.parametrize(("budget", "frac", "message"), [
    (-1, 0.5, "needs the expert cache"), (1 << 20, float("nan"), "between 0 and 1"),
    (1 << 20, 1.5, "between 0 and 1")])
def test_the_native_streamer_refuses_a_drop_policy_it_cannot_honour(model, budget, frac, message):
    from workbench.moe.streamer import DropPolicy, StreamerError

    with pytest.raises(StreamerError, match=message):
        ExpertStreamer([model], lanes=1, o_direct=False, budget_bytes=budget,
                       drop=DropPolicy(frac))
