"""The bench model routes like a real model (issue 35): its greedy decode, measured the way the
upstream engine's Qwen3-30B-A3B trace is (`route_stats.routing_figures`), stands within
`route_stats.TOLERANCE` of the trace's figures on every one but popularity drift, which the
recipe's stationary byte text cannot give (it is asserted to be the known gap, so a change that
closes or widens it shows). The control is the recipe it replaced, whose sharp router fails.

The 2 GiB bench model is the one the benches use (bench/stream.py `bench_model`, cached); the
control is a one-layer model of the old recipe at the same widths (the weight figures are per
row, so one layer is enough to show them fail)."""

from __future__ import annotations

import pytest

from workbench.bench.stream import _config, bench_model, decode_routes
from workbench.moe import route_stats as rs
from workbench.moe.layout import read_model_facts
from workbench.moe.synth import write_synthetic_moe

N_TOKENS = 128  # the real trace's length
DRIFT = ("drift_kept", "drift_share")


def _figures(model) -> tuple[rs.RoutingFigures, list[int]]:
    facts = read_model_facts(model)
    traced = decode_routes(_config(model, 2, N_TOKENS, moe_stream=True, cache_mb=4000), N_TOKENS)
    assert traced.result.ok, traced.result.error
    layers = len({layer for layer, _ in traced.loads})
    return rs.routing_figures(traced.loads, traced.weights, n_expert=facts.n_expert,
                              n_expert_used=facts.n_expert_used, n_layers=layers), traced.generated


def test_the_bench_model_routes_within_tolerance_of_real_routing():
    figures, generated = _figures(bench_model(2.0))
    assert rs.tail_period(generated) == 0  # varied text: a cycling one would flatter caches
    checks = rs.against(figures)
    off = [c for c in checks if not c.ok and c.name not in DRIFT]
    assert not off, off
    # The known gap: favourites that stay (kept above the real 0.62 by more than its tolerance).
    kept = next(c for c in checks if c.name == "drift_kept")
    assert not kept.ok and kept.measured > kept.target, kept


@pytest.fixture(scope="module")
def old_recipe(tmp_path_factory):
    out = tmp_path_factory.mktemp("old-router") / "sharp.gguf"
    return write_synthetic_moe(out, size="bench", n_layer=1, router_gain=3.0, router_zipf=0.4,
                               copy_gain=1.0)[0]


def test_the_recipe_it_replaced_fails_the_weight_figures(old_recipe):
    figures, _ = _figures(old_recipe)
    failed = {c.name for c in rs.against(figures) if not c.ok}
    assert {"top_slot_mean", "below_075k_slots"} <= failed, failed
