"""The cache-sizing curves (Qt-free): budgets, and what a budget between two points implies."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.cli.replay import parse_budgets
from workbench.moe.cache_sizing import compute_curves
from workbench.moe.replay import MIB, default_budgets
from workbench.moe.route_trace import TraceMeta
from workbench.moe.routes import Phase, RouteLoad


def test_budgets_are_even_steps_to_every_expert_plus_the_one_in_force():
    assert default_budgets(800, 250, points=4) == [200, 250, 400, 600, 800]
    assert default_budgets(800, -1, points=4) == [200, 400, 600, 800]
    assert default_budgets(800, 400, points=4) == [200, 400, 600, 800]  # once


def test_curves_of_a_cycle_show_the_cliff_and_interpolate_reads():
    # One layer of 4 experts of 1 MiB, each token routes 2: a cycle 0,1 / 2,3 / 0,1 / ...
    def tok(step: int) -> tuple[int, RouteLoad]:
        e = np.array([[0, 1]] if step % 2 == 0 else [[2, 3]], np.int32)
        return 0, RouteLoad(0, Phase.DECODE, step, e, np.full(e.shape, np.nan, np.float32),
                            np.full(e.shape, -1, np.int8), np.zeros(e.shape, np.bool_))

    meta = TraceMeta("m", "qwen3moe", 1, 4, 2, 2 * MIB, {0: MIB})
    c = compute_curves([tok(s) for s in range(10)], meta, points=4)
    assert c.budget_mib.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert c.current_mib == 2.0 and c.cliff_mib == 2.0 and c.total_mib == 4.0 and c.tokens == 10
    # At 2 MiB (one token's experts) a load keeps the whole cache: nothing stays for the next
    # token, whatever the policy. One MiB more keeps one expert of the other pair: 1 hit of 2
    # per token from the third on (8 of 20 lookups).
    assert c.hit_at(2.0) == (0.0, 0.0)
    assert c.hit_at(3.0) == (40.0, 40.0)
    # With room for all four, only the first two tokens miss: 4 MiB over 10 tokens.
    assert c.lru_hit_pct[-1] == c.belady_hit_pct[-1] == 80.0
    assert c.reads_at(4.0) == (pytest.approx(0.4), pytest.approx(0.4))
    assert c.reads_at(3.5)[0] == pytest.approx((c.lru_mib_per_token[2] + 0.4) / 2)


def test_budgets_on_the_command_line():
    assert parse_budgets(["1,2", "0.5"]) == [MIB // 2, MIB, 2 * MIB]
    for bad in (["0"], ["-3"], ["inf"], ["x"]):
        with pytest.raises(ValueError, match="--cache-mb"):
            parse_budgets(bad)
