"""Bootstrap statistics against synthetic series whose true answer is known.

The coverage tests simulate many series from a known process and count how often the 95 %
interval contains the truth; a correct interval does so about 95 % of the time. Fewer resamples
than the default keep them fast; the band allows for the Monte Carlo error of 400 trials
(one standard error is ~1.1 %).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.bench.stats import (
    Interval,
    aggregate_rate_ci,
    block_bootstrap_draws,
    block_indices,
    block_length,
    finite,
    moving_block_bootstrap,
    normalize,
    paired_ratio_ci,
    pearson_r,
    percentile,
    percentile_stat,
    percentiles,
    pooled_draws,
    repeat_counts,
    stall_count,
)

TRIALS = 400
RESAMPLES = 400
BAND = (0.88, 0.99)


def ar1(trials: int, n: int, phi: float, seed: int) -> np.ndarray:
    """`trials` stationary AR(1) series of length n, mean 0 and unit innovations."""
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(trials, n))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0] / math.sqrt(1 - phi * phi)  # start in the stationary distribution
    for i in range(1, n):
        x[:, i] = phi * x[:, i - 1] + e[:, i]
    return x


def coverage(series: np.ndarray, truth: float, **kwargs: object) -> float:
    hits = 0
    for k, s in enumerate(series):
        iv = moving_block_bootstrap(s, resamples=RESAMPLES, seed=k, **kwargs)
        hits += iv.low <= truth <= iv.high
    return hits / len(series)


# ---- coverage ----------------------------------------------------------------------------------


def test_mean_interval_covers_the_truth_for_iid_series():
    series = 10.0 + ar1(TRIALS, 512, 0.0, seed=1)
    assert BAND[0] <= coverage(series, 10.0) <= BAND[1]


def test_mean_interval_covers_the_truth_for_autocorrelated_series():
    series = 10.0 + ar1(TRIALS, 512, 0.5, seed=2)
    assert BAND[0] <= coverage(series, 10.0) <= BAND[1]


def test_an_iid_bootstrap_of_autocorrelated_tokens_is_too_narrow():
    # The reason for blocks: resampling single tokens (block=1) ignores that neighbours move
    # together, and the interval misses the truth far more often than 5 % of the time.
    series = 10.0 + ar1(TRIALS, 512, 0.5, seed=2)
    assert coverage(series, 10.0, block=1) < 0.85


def test_aggregate_rate_interval_covers_the_true_rate():
    # Decode times that drift (log-AR(1)): the true rate is 1000 / E[wall].
    sigma, phi = 0.2, 0.5
    walls = 20.0 * np.exp(sigma * ar1(TRIALS, 512, phi, seed=3))
    true_rate = 1000.0 / (20.0 * math.exp(sigma**2 / (2 * (1 - phi * phi))))
    hits = 0
    for k, w in enumerate(walls):
        iv = aggregate_rate_ci(w, resamples=RESAMPLES, seed=k)
        hits += iv.low <= true_rate <= iv.high
    assert BAND[0] <= hits / TRIALS <= BAND[1]


def test_paired_ratio_interval_covers_the_true_ratio():
    # Each repeat shares a machine state (x0.75..x1.3) between its two arms; the true ratio of
    # expected times is exactly 1.25.
    rng = np.random.default_rng(4)
    hits = 0
    for k in range(TRIALS):
        state = np.exp(rng.normal(0, 0.3, size=12))
        a = 100 * state * np.exp(rng.normal(0, 0.05, size=12))
        b = 80 * state * np.exp(rng.normal(0, 0.05, size=12))
        iv = paired_ratio_ci(a, b, resamples=500, seed=k)
        hits += iv.low <= 1.25 <= iv.high
    assert BAND[0] <= hits / TRIALS <= BAND[1]


def test_pairing_removes_the_shared_machine_state():
    rng = np.random.default_rng(5)
    state = np.exp(rng.normal(0, 0.4, size=10))
    a = 100 * state * np.exp(rng.normal(0, 0.02, size=10))
    b = 80 * state * np.exp(rng.normal(0, 0.02, size=10))
    paired = paired_ratio_ci(a, b)
    ia, ib = (np.random.default_rng(6).integers(0, 10, size=(2, 2000, 10)))
    unpaired = np.quantile(a[ia].sum(axis=1) / b[ib].sum(axis=1), [0.025, 0.975])
    assert paired.high - paired.low < (unpaired[1] - unpaired[0]) / 4
    assert not paired.excludes(1.25)


# ---- the machinery -----------------------------------------------------------------------------


def test_block_length_follows_the_protocol():
    assert block_length(256) == 16  # n^(1/3) = 6.3, clamped up to 16
    assert block_length(30_000) == 31
    assert block_length(10**6) == 32  # clamped down
    assert block_length(40) == 10  # short: four blocks
    assert block_length(3) == 1


def test_circular_blocks_draw_every_position_equally_often():
    idx = block_indices(100, 16, 4000, np.random.default_rng(0))
    assert idx.shape == (4000, 100)
    steps = np.diff(idx, axis=1) % 100
    # Inside a block indices advance by one, wrapping from 99 to 0.
    assert np.all(steps[:, :15] == 1)
    counts = np.bincount(idx.ravel(), minlength=100) / (4000 * 100 / 100)
    assert counts.min() > 0.9 and counts.max() < 1.1  # the ends are not under-sampled


def test_draws_are_reproducible_and_chunked_draws_are_complete():
    x = np.random.default_rng(1).normal(size=50_000)
    a = block_bootstrap_draws([x], resamples=200, seed=3)
    b = block_bootstrap_draws([x], resamples=200, seed=3)
    assert a.shape == (200,) and np.array_equal(a, b)  # 50k x 200 spans several chunks
    assert abs(a.mean() - x.mean()) < 0.01


def test_stratified_draws_keep_each_run_apart():
    # Two runs with different levels: every resample keeps both runs' sizes, so the pooled mean
    # of a resample can only move by within-run noise.
    runs = [np.full(100, 10.0), np.full(300, 20.0)]
    draws = block_bootstrap_draws(runs, resamples=100)
    assert np.allclose(draws, (100 * 10 + 300 * 20) / 400)


def test_nan_values_are_left_out_and_an_all_nan_series_is_an_error():
    clean = np.random.default_rng(2).normal(5.0, 1.0, size=200)
    holed = np.insert(clean, [0, 50, 50, 199], np.nan)  # unmeasured tokens
    iv = moving_block_bootstrap(holed)
    assert iv == moving_block_bootstrap(clean)
    assert iv.estimate == pytest.approx(clean.mean())
    assert iv.low < iv.estimate < iv.high
    with pytest.raises(ValueError):
        moving_block_bootstrap([math.nan, math.nan])


def test_aggregate_rate_is_tokens_over_total_wall_not_a_mean_of_rates():
    walls = [10.0] * 9 + [910.0]  # one stall
    iv = aggregate_rate_ci(walls)
    assert iv.estimate == pytest.approx(10 / 1.0)  # 10 tokens in 1 s
    assert iv.estimate < np.mean([1000 / w for w in walls])  # the mean of rates hides the stall
    assert iv.low <= iv.estimate <= iv.high


def test_percentile_statistics():
    x = np.arange(1, 101, dtype=float)
    assert percentile(x, 50) == pytest.approx(50.5)
    assert percentiles(np.append(x, np.nan), [5, 95]) == pytest.approx({5: 5.95, 95: 95.05})
    assert math.isnan(percentile([math.nan], 50))
    assert float(percentile_stat(99)(x)) == pytest.approx(99.01)
    iv = moving_block_bootstrap(x, percentile_stat(95))
    assert iv.estimate == pytest.approx(95.05)
    assert stall_count([10, 11, 9, 10, 35, 100]) == 2


def test_repeat_counts_draw_n_repeats_per_resample():
    counts = repeat_counts(5, 1000, np.random.default_rng(0))
    assert counts.shape == (1000, 5) and np.all(counts.sum(axis=1) == 5)
    assert np.allclose(counts.mean(axis=0), 1.0, atol=0.1)


@pytest.mark.parametrize(("reduce", "q", "naive"), [
    ("mean", 50.0, np.mean),
    ("rate", 50.0, lambda x: 1000 * x.size / x.sum()),
    ("percentile", 50.0, np.median),
    ("percentile", 95.0, lambda x: np.percentile(x, 95)),
    ("percentile", 100.0, np.max),
])
def test_pooled_draws_equal_the_statistic_of_the_copied_repeats(reduce, q, naive):
    rng = np.random.default_rng(1)
    parts = [rng.gamma(2.0, 10.0, size=n) for n in (30, 1, 45, 12)]
    parts[2][::5] = np.nan  # unmeasured values are left out
    counts = repeat_counts(len(parts), 50, rng)
    counts[0] = [0, 1, 0, 0]  # a resample of the one-value repeat only
    draws = pooled_draws(parts, counts, reduce, q)
    for row, d in zip(counts, draws, strict=True):
        copied = np.concatenate([np.repeat(finite(p), c) for p, c in zip(parts, row, strict=True)])
        assert d == pytest.approx(naive(copied))
    assert np.isnan(pooled_draws([np.array([np.nan])], np.ones((1, 1)), reduce, q)[0])


def test_paired_ratio_ci_keeps_its_contract():
    iv = paired_ratio_ci([2.0, 4.0], [1.0, 2.0])
    assert iv == Interval(2.0, 2.0, 2.0)
    assert paired_ratio_ci([3.0], [2.0]) == Interval(1.5, 1.5, 1.5)
    with pytest.raises(ValueError):
        paired_ratio_ci([1.0], [1.0, 2.0])


# ---- the correlate view ------------------------------------------------------------------------


def test_pearson_r_matches_numpy_and_ignores_unmeasured_pairs():
    rng = np.random.default_rng(7)
    a = rng.normal(size=200)
    b = 0.6 * a + rng.normal(size=200)
    assert pearson_r(a, b) == pytest.approx(np.corrcoef(a, b)[0, 1])
    a2, b2 = a.copy(), b.copy()
    a2[::7] = np.nan
    b2[3::11] = np.nan
    keep = np.isfinite(a2) & np.isfinite(b2)
    assert pearson_r(a2, b2) == pytest.approx(np.corrcoef(a[keep], b[keep])[0, 1])
    assert pearson_r([1, 2, 3], [-2, -4, -6]) == pytest.approx(-1.0)
    assert math.isnan(pearson_r([1, 1, 1], [1, 2, 3]))  # constant: undefined
    assert math.isnan(pearson_r([1, math.nan], [1, 2]))  # one pair
    with pytest.raises(ValueError):
        pearson_r([1, 2], [1, 2, 3])


def test_normalize_keeps_nan_and_maps_to_a_shared_scale():
    x = [2.0, math.nan, 4.0, 6.0, math.inf]
    mm = normalize(x)
    assert mm[[0, 2, 3]] == pytest.approx([0.0, 0.5, 1.0])
    assert math.isnan(mm[1]) and math.isnan(mm[4])
    z = normalize(x, "zscore")
    assert z[[0, 2, 3]] == pytest.approx([-math.sqrt(1.5), 0.0, math.sqrt(1.5)])
    assert math.isnan(z[1])
    assert normalize([3.0, 3.0]) == pytest.approx([0.5, 0.5])
    assert normalize([3.0, 3.0], "zscore") == pytest.approx([0.0, 0.0])
    with pytest.raises(ValueError):
        normalize([1.0], "rank")  # type: ignore[arg-type]
