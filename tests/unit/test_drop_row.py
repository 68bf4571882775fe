"""The drop rule on one token row, as the native eval callback applies it (wb_drop_row).

Rows are written the way an unnormalised router gives them (weights that need not sum to 1, a
top weight below frac / k), because on a normalised router several rules cannot be told from
their absence: a top weight is then always >= 1/k >= frac/k, and renormalising to 1 is
renormalising to the row's total.
"""

from __future__ import annotations

import numpy as np
import pytest

from workbench.moe.streamer import drop_row

MISS, HIT = 0, 1


def test_the_top_slot_is_kept_even_below_the_threshold():
    # k = 2, frac 1: the threshold is 0.5 and both weights are under it, both experts missed.
    row = drop_row(np.array([0.3, 0.2]), np.array([7, 4]), np.array([MISS, MISS]), 1.0)
    assert row.dropped.tolist() == [False, True]
    assert row.ids.tolist() == [7, 7]  # the dropped slot reads the top expert, weight 0


def test_without_the_pin_the_top_slot_would_drop_too():
    # The negative control of the pin: the same row, judged without it, loses every expert.
    row = drop_row(np.array([0.3, 0.2]), np.array([7, 4]), np.array([MISS, MISS]), 1.0,
                   pin_top=False)
    assert row.dropped.tolist() == [True, True]
    assert row.weights.tolist() == [0.0, 0.0]


def test_at_top_k_1_the_only_slot_is_the_top_one_and_never_drops():
    # Threshold frac / 1 = frac: any sigmoid weight is below 1.0.
    row = drop_row(np.array([0.4]), np.array([3]), np.array([MISS]), 1.0)
    assert not row.dropped.any() and row.weights.tolist() == pytest.approx([0.4])


def test_the_threshold_is_frac_over_the_rows_own_k():
    w = np.array([0.5, 0.2, 0.2, 0.1], dtype=np.float32)
    ids = np.arange(4)
    res = np.full(4, MISS)
    # k = 4, frac 1: threshold 0.25, so 0.2 and 0.1 drop; at frac 0.75 (0.1875) only 0.1 does.
    assert drop_row(w, ids, res, 1.0).dropped.tolist() == [False, True, True, True]
    assert drop_row(w, ids, res, 0.75).dropped.tolist() == [False, False, False, True]
    # A weight exactly at the threshold stays (the rule is "below").
    assert drop_row(np.array([0.6, 0.25]), ids[:2], res[:2], 0.5).dropped.tolist() == [
        False, False]


def test_a_resident_expert_is_never_dropped():
    row = drop_row(np.array([0.5, 0.01, 0.01]), np.array([1, 2, 3]),
                   np.array([MISS, HIT, MISS]), 1.0)
    assert row.dropped.tolist() == [False, False, True]


def test_renormalisation_restores_the_rows_own_total_not_one():
    # An unnormalised row totalling 1.6; the 0.2 slot drops (threshold 1/3).
    w = np.array([0.9, 0.5, 0.2], dtype=np.float32)
    row = drop_row(w, np.array([0, 1, 2]), np.full(3, MISS), 1.0, renorm=True)
    assert row.dropped.tolist() == [False, False, True]
    assert row.total_weight == pytest.approx(1.6)
    assert row.dropped_weight == pytest.approx(0.2)
    assert float(row.weights.sum()) == pytest.approx(1.6, rel=1e-6)
    assert row.weights[:2].tolist() == pytest.approx([0.9 * 1.6 / 1.4, 0.5 * 1.6 / 1.4])


def test_without_renormalisation_the_survivors_keep_their_weights():
    w = np.array([0.9, 0.5, 0.2], dtype=np.float32)
    row = drop_row(w, np.array([0, 1, 2]), np.full(3, MISS), 1.0, renorm=False)
    assert row.weights.tolist() == pytest.approx([0.9, 0.5, 0.0])
    assert row.dropped_weight == pytest.approx(0.2)  # reported before any rescaling


def test_a_row_that_drops_nothing_is_left_alone_under_renorm():
    w = np.array([0.9, 0.5], dtype=np.float32)
    row = drop_row(w, np.array([0, 1]), np.full(2, MISS), 1.0, renorm=True)
    assert not row.dropped.any() and row.weights.tolist() == pytest.approx([0.9, 0.5])
