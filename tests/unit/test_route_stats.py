"""The routing figures, on traces whose answers are known by construction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.moe import route_stats as rs


def _trace(sets_per_token: list[list[int]], n_layer: int = 1) -> list[tuple[int, list[int]]]:
    return [(layer, ids) for ids in sets_per_token for layer in range(n_layer)]


def test_lru_on_a_cycle_longer_than_the_cache_never_hits_and_a_big_cache_always_does():
    loads = _trace([[0], [1], [2]] * 10)
    assert rs.lru_hit_rate(loads, 2) == 0.0  # LRU's worst case: the cycle evicts what comes next
    assert rs.lru_hit_rate(loads, 3) == pytest.approx(27 / 30)  # only the 3 cold misses
    assert math.isnan(rs.lru_hit_rate([], 4))


def test_a_load_never_evicts_its_own_experts():
    # Capacity 1 but two experts per load: both stay, so the repeat of the same pair hits.
    loads = _trace([[0, 1], [0, 1]])
    assert rs.lru_hit_rate(loads, 1) == pytest.approx(0.5)


def test_lru_curve_follows_capacity():
    loads = _trace([[0], [1], [2], [3]] * 5)
    assert rs.lru_curve(loads, [1, 4]) == [0.0, pytest.approx(16 / 20)]


def test_consecutive_overlap_is_per_layer():
    loads = [(0, [1, 2]), (1, [5, 6]), (0, [1, 3]), (1, [7, 8])]
    assert rs.consecutive_overlap(loads) == pytest.approx((0.5 + 0.0) / 2)
    assert rs.consecutive_overlap(_trace([[1, 2]] * 4)) == 1.0


def test_top_expert_share_uniform_vs_hot():
    uniform = _trace([[e] for e in range(10)] * 3)
    assert rs.top_expert_share(uniform, 10, top_frac=0.1) == pytest.approx(0.1)
    hot = _trace([[0]] * 9 + [[1]])
    assert rs.top_expert_share(hot, 10, top_frac=0.1) == pytest.approx(0.9)


def test_distinct_share_and_tail_period():
    assert rs.distinct_share([5] * 10) == 0.1
    assert rs.tail_period([7] * 70) == 1
    assert rs.tail_period([1, 2, 3] * 30) == 3
    rng = np.random.default_rng(0)
    assert rs.tail_period(rng.integers(0, 50, 200).tolist()) == 0


def test_weight_figures_leave_the_top_slot_alone():
    k = 4
    w = np.array([[0.7, 0.2, 0.06, 0.04], [0.4, 0.3, 0.2, 0.1]])
    f = rs.weight_figures(w, fracs=(1.0,))
    assert f.top_slot_mean == pytest.approx(0.55)
    # Non-top slots below 1/k = 0.25: 0.2, 0.06, 0.04 and 0.2, 0.1 -> 5 of 6.
    assert f.below_share[1.0] == pytest.approx(5 / 6)
    assert f.below_mass[1.0] == pytest.approx((0.2 + 0.06 + 0.04 + 0.2 + 0.1) / 2)
    nan_rows = np.full((2, k), np.nan)
    assert math.isnan(rs.weight_figures(nan_rows).top_slot_mean)
