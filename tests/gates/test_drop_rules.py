"""Dropping's rules on models that can tell them apart (upstream's drop-cold rules, 1.15).

On a normalised router every rule below passes without the code behind it: the top weight is
then >= 1/k >= frac/k, so deleting the top expert's pin changes nothing, and a router total of 1
hides what renormalisation rescales to. These gates use synthetic routers that do not normalise
(bailingmoe3, sigmoid gating, `router_norm=False`), at top-k 1 as well, each with a negative
control that shows the gate fails without the rule. Every run streams through a cache that
holds one token's demand but evicts (2 MiB against 6 MiB of experts), at n_ubatch 1 so that
greedy runs compare bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.gates.gate_runs import Run, assert_identical, gate_config, recorded
from workbench.config import MEMORY_MIB
from workbench.engine.requests import GenerateRequest, SessionError
from workbench.engine.session import Session
from workbench.moe.replay import lookups, replay_drop, replay_lru
from workbench.moe.routes import Phase, Residency, RouteLoad
from workbench.moe.streamer import DEBUG_NO_PIN, ExpertStreamer
from workbench.moe.synth import write_synthetic_moe

EVICTING = {"moe_stream": True, "cache_mb": 2, "o_direct": False}


@pytest.fixture
def run(run: Callable[..., Run]) -> Callable[..., Run]:
    return functools.partial(run, n_ubatch=1)


@pytest.fixture(scope="module")
def unnormalised_top1(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("drop") / "bailing-unnorm-top1.gguf"
    return write_synthetic_moe(out, arch="bailingmoe3", router_norm=False, n_expert_used=1)[0]


@pytest.fixture(scope="module")
def qwen(tmp_path_factory) -> Path:
    return write_synthetic_moe(tmp_path_factory.mktemp("drop") / "qwen.gguf")[0]


def _counters(r: Run):
    return r.session.streaming.streamer.counters()


def _rule(x: RouteLoad, frac: float) -> np.ndarray:
    """Which slots of a recorded load the rule drops: not the row's top, a miss, below frac/k
    with k the load's own (the graph's) top-k."""
    want = np.zeros(x.experts.shape, dtype=bool)
    for t, w in enumerate(x.weights):
        top = int(np.argmax(w))
        for j in range(x.top_k):
            want[t, j] = j != top and x.residency[t, j] == Residency.MISS and w[j] < frac / x.top_k
    return want


# ---- the pin -----------------------------------------------------------------------------------


def test_at_top_k_1_an_unnormalised_router_keeps_its_only_expert(unnormalised_top1, run):
    undropped = run(unnormalised_top1, **EVICTING)
    dropped = run(unnormalised_top1, record_routes=True, drop_cold_frac=1.0, drop_prefill=True,
                  **EVICTING)
    assert_identical(undropped, dropped)
    c = _counters(dropped)
    assert c.experts_routed > 0 and c.experts_dropped == 0
    # The pin is what kept them: every weight is under the threshold frac / 1, and many slots
    # missed the cache, so without it the rule would have dropped each of those.
    loads = recorded(dropped.session)
    weights = np.concatenate([x.weights.reshape(-1) for x in loads if x.n_tokens])
    misses = sum(int((x.residency == Residency.MISS).sum()) for x in loads)
    assert (weights < 1.0).all() and misses > 0


def test_the_pins_negative_control_drops_the_only_expert_and_changes_the_logits(
        unnormalised_top1, run, monkeypatch):
    undropped = run(unnormalised_top1, **EVICTING)
    monkeypatch.setattr(ExpertStreamer, "debug_flags", DEBUG_NO_PIN)
    unpinned = run(unnormalised_top1, drop_cold_frac=1.0, drop_prefill=True, **EVICTING)
    assert _counters(unpinned).experts_dropped > 0
    with pytest.raises(AssertionError, match="logits differ"):
        assert_identical(undropped, unpinned)


# ---- the threshold uses the graph's top-k, and the rule is applied exactly ----------------------


def test_dropped_slots_are_exactly_the_rules_at_the_graphs_top_k(qwen, run):
    # The model routes top-2; the override makes the graph route 4. The threshold is then
    # frac / 4: slots weighted in [frac/4, frac/2) separate it from the model's k.
    frac = 1.0
    r = run(qwen, record_routes=True, n_expert_used=4, drop_cold_frac=frac, drop_prefill=True,
            moe_stream=True, cache_mb=3, o_direct=False)
    loads = recorded(r.session)
    assert {x.top_k for x in loads} == {4}
    # Each layer's first load (the first prompt token) learns its weight chain: none drop there.
    firsts = {id(next(x for x in loads if x.layer == layer)) for layer in {x.layer for x in loads}}
    assert not any(x.dropped.any() for x in loads if id(x) in firsts)
    between = 0
    for x in (x for x in loads if id(x) not in firsts and x.n_tokens):
        np.testing.assert_array_equal(x.dropped, _rule(x, frac))
        cold = (x.residency == Residency.MISS) & (x.weights >= frac / 4) & (x.weights < frac / 2)
        between += int(cold.sum())
    assert between > 0  # at frac / 2 these would have dropped: the test can tell the two apart
    assert sum(int(x.dropped.sum()) for x in loads) == _counters(r).experts_dropped > 0


# ---- renormalisation -----------------------------------------------------------------------------


def test_renormalisation_changes_what_the_dropped_rows_compute(qwen, run):
    renorm = run(qwen, drop_cold_frac=1.0, **EVICTING)
    plain = run(qwen, drop_cold_frac=1.0, drop_renorm=False, **EVICTING)
    assert _counters(renorm).experts_dropped > 0 and _counters(plain).experts_dropped > 0
    with pytest.raises(AssertionError, match="logits differ"):
        assert_identical(renorm, plain)


# ---- the first token of a turn, and recording routes ------------------------------------------


def test_recording_routes_changes_nothing_dropping_does_and_the_first_token_drops(qwen, run):
    plain = run(qwen, drop_cold_frac=1.0, **EVICTING)
    traced = run(qwen, record_routes=True, drop_cold_frac=1.0, **EVICTING)
    assert_identical(plain, traced)
    a, b = _counters(plain), _counters(traced)
    assert (a.experts_dropped, a.decode_dropped_weight, a.decode_weight) == (
        b.experts_dropped, b.decode_dropped_weight, b.decode_weight)
    # The weight chain was learned on the prompt, so the first generated token is judged too.
    decode = [x for x in recorded(traced.session) if x.phase == Phase.DECODE]
    first = min(x.first_step for x in decode)
    assert any(x.dropped.any() for x in decode if x.first_step == first)


def test_a_second_turns_first_token_drops_too(qwen):
    with Session.open(gate_config(qwen, n_ubatch=1, drop_cold_frac=1.0, **EVICTING),
                      record_routes=True) as s:
        for text in ("Hello world, this is a streaming test.", " And a second turn"):
            assert s.generate(GenerateRequest(text=text)).ok
        turns = s.streaming.routes.loads()
    firsts: dict[int, int] = {}
    for turn, x in turns:
        if x.phase == Phase.DECODE:
            firsts[turn] = min(firsts.get(turn, x.first_step), x.first_step)
    assert len(firsts) == 2
    for turn, step in firsts.items():
        assert any(x.dropped.any() for t, x in turns
                   if t == turn and x.phase == Phase.DECODE and x.first_step == step), turn


# ---- one definition of the weight mass dropped ------------------------------------------------


def test_weight_mass_dropped_is_one_figure_in_engine_records_and_replay(qwen):
    frac = 1.0
    with Session.open(gate_config(qwen, n_ubatch=1, drop_cold_frac=frac, **EVICTING),
                      record_routes=True) as s:
        result = s.generate(GenerateRequest(text="Hello world, this is a streaming test."))
        runtime = s.streaming
        pairs = runtime.routes.loads()
        c = runtime.streamer.counters()
    decode = [x for _, x in pairs if x.phase == Phase.DECODE]
    total = sum(float(np.sum(x.weights, dtype=np.float64)) for x in decode)
    lost = sum(float(np.sum(x.weights[x.dropped], dtype=np.float64)) for x in decode)
    # The counters are the router's whole decode weight and its dropped part (prefill, which
    # does not drop here but was weighed for learning, is not in them).
    assert c.decode_weight == pytest.approx(total, rel=1e-5)
    assert c.decode_dropped_weight == pytest.approx(lost, rel=1e-5)
    pct = result.summary.drop_weight_pct
    assert pct > 0 and pct == pytest.approx(100.0 * lost / total, rel=1e-5)
    # The replay, from the records alone, predicts the same slots and the same mass.
    budget = EVICTING["cache_mb"] << 20
    base = replay_lru(lookups(pairs), runtime.expert_bytes, budget)
    what_if = replay_drop(pairs, runtime.expert_bytes, budget, frac, base)
    n_slots = sum(x.weights.size for x in decode)
    assert what_if.slots_dropped_pct == pytest.approx(100.0 * c.experts_dropped / n_slots)
    assert what_if.mass_dropped_pct == pytest.approx(pct, rel=1e-5)


# ---- dropping needs a cache that can hit ---------------------------------------------------------


def test_a_cache_below_one_tokens_demand_is_refused_with_the_budget_needed(qwen):
    # Tiny: 4 MoE layers x top-2 x 192 KiB = 1.5 MiB a token; 1 MiB hits nothing.
    with pytest.raises(SessionError, match=r"1\.5 MiB for this model.*--cache-mb to 2 MiB"):
        Session.open(gate_config(qwen, drop_cold_frac=0.75, moe_stream=True, cache_mb=1))
    # The same cache without dropping only warns.
    with Session.open(gate_config(qwen, moe_stream=True, cache_mb=1)) as s:
        assert any("smaller than one token's expert demand" in w for w in s.warnings)


def test_an_automatic_cache_that_resolves_to_nothing_is_refused(qwen):
    huge_floor = MEMORY_MIB  # leave all of physical memory free: the budget resolves to 0
    with pytest.raises(SessionError, match=r"expert cache is 0\.0 MiB \(automatic.*floor"):
        Session.open(gate_config(qwen, drop_cold_frac=0.75, moe_stream=True, cache_auto=True,
                                 cache_floor_mb=huge_floor))


def test_a_resize_below_one_tokens_demand_is_refused_while_dropping(qwen):
    with Session.open(gate_config(qwen, drop_cold_frac=0.75, **EVICTING)) as s:
        with pytest.raises(SessionError, match="one token's expert demand"):
            s.set_cache_budget_mib(1)
        assert s.streaming.streamer.counters().budget_now == 2 << 20  # unchanged
        assert s.generate(GenerateRequest(text="Hi")).ok
