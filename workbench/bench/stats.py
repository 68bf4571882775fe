"""Bootstrap statistics for benchmark figures (pure functions, numpy only).

Per-token times are autocorrelated (warm-up, eviction bursts, throttling), so an iid bootstrap of
them gives intervals that are too narrow. Within a run we resample circular blocks of consecutive
tokens (the moving-block bootstrap); across repeats we resample whole repeats, keeping the arms of
one repeat together when a ratio is wanted (the paired bootstrap). Intervals are percentile
intervals of the bootstrap distribution. Resampling whole repeats is done with counts (how often
each repeat is drawn) rather than copies, so it stays vectorized too.

A statistic is any callable ``stat(samples, axis=-1)`` that reduces the last axis (``np.mean``,
``np.median``, ``percentile_stat(95)``, ``rate_stat``): resamples are evaluated as 2-D arrays, one
resample per row, which keeps 2000 resamples to a handful of numpy calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Stat = Callable[..., "np.ndarray | float"]
Reduce = Literal["mean", "rate", "percentile", "exp_mean"]

# Rows of resampled indices built at once: bounds memory to ~32 MB whatever the series length.
_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True, slots=True)
class Interval:
    estimate: float
    low: float
    high: float

    def excludes(self, value: float) -> bool:
        return not (self.low <= value <= self.high)

    def __str__(self) -> str:
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"


def paired_ratio_ci(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """CI of sum(num)/sum(den) by resampling matched repeats (pairs stay together).

    Pairing is what makes a ratio measured on a noisy machine meaningful: each repeat's two arms
    ran back to back under the same conditions.
    """
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.shape != den.shape or num.size == 0:
        raise ValueError("need the same, non-zero number of numerators and denominators")
    estimate = float(num.sum() / den.sum())
    if num.size == 1:
        return Interval(estimate, estimate, estimate)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, num.size, size=(resamples, num.size))
    ratios = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(ratios, [alpha, 1 - alpha])
    return Interval(estimate, float(low), float(high))


# ---- statistics ------------------------------------------------------------------------------


def percentile_stat(q: float) -> Stat:
    """The q-th percentile (0..100) as a statistic."""

    def stat(x: np.ndarray, axis: int = -1) -> np.ndarray | float:
        return np.percentile(x, q, axis=axis)

    stat.__name__ = f"p{q:g}"
    return stat


def rate_stat(x: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """Tokens per second from per-token milliseconds: n / sum(wall), never a mean of rates."""
    return 1000.0 / np.mean(x, axis=axis)


def exp_mean_stat(x: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """exp of the mean: perplexity from per-position negative log-likelihoods (nats)."""
    return np.exp(np.mean(x, axis=axis))


def reduce_stat(reduce: Reduce, q: float = 50.0) -> Stat:
    """The statistic a reduction names ("mean", "rate", "percentile" with q, "exp_mean")."""
    if reduce == "mean":
        return np.mean
    if reduce == "exp_mean":
        return exp_mean_stat
    if reduce == "rate":
        return rate_stat
    if reduce == "percentile":
        return percentile_stat(q)
    raise ValueError(f"unknown reduction {reduce!r}")


def finite(series: Sequence[float] | np.ndarray) -> np.ndarray:
    """The series as floats without NaN and infinities (unmeasured values are NaN by then)."""
    x = np.asarray(series, dtype=float).ravel()
    return x[np.isfinite(x)]


def percentile(series: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile (0..100) of the measured values; NaN when there are none."""
    x = finite(series)
    return float(np.percentile(x, q)) if x.size else float("nan")


def percentiles(series: Sequence[float] | np.ndarray, qs: Sequence[float]) -> dict[float, float]:
    x = finite(series)
    if not x.size:
        return {q: float("nan") for q in qs}
    return {q: float(v) for q, v in zip(qs, np.percentile(x, list(qs)), strict=True)}


def stall_count(series: Sequence[float] | np.ndarray, factor: float = 3.0) -> int:
    """Tokens slower than `factor` x the median: the protocol's count of stalls."""
    x = finite(series)
    return int(np.count_nonzero(x > factor * np.median(x))) if x.size else 0


# ---- the moving-block bootstrap --------------------------------------------------------------


def block_length(n: int) -> int:
    """Default block: ~n^(1/3), clamped to 16..32 tokens once a series has at least four blocks
    of 16 (the protocol's range); shorter series get n // 4 so they still have four blocks."""
    if n >= 64:
        return int(min(32, max(16, round(n ** (1 / 3)))))
    return max(1, n // 4)


def block_indices(
    n: int, block: int, count: int, rng: np.random.Generator
) -> np.ndarray:
    """`count` rows of n indices made of circular blocks of `block` consecutive positions.

    Circular (wrapping at the end) so that every token is equally likely to be drawn; plain
    moving blocks under-sample both ends of the series.
    """
    n_blocks = -(-n // block)
    block = min(block, n)
    starts = rng.integers(0, n, size=(count, n_blocks), dtype=np.int32)
    idx = starts[:, :, None] + np.arange(block, dtype=np.int32)
    idx[idx >= n] -= n  # wrap; cheaper than a modulo over every index
    return idx.reshape(count, n_blocks * block)[:, :n]


def _row_chunks(resamples: int, width: int) -> list[tuple[int, int]]:
    """(first row, row count) pairs that keep each chunk near _CHUNK_ELEMENTS values."""
    per = max(1, _CHUNK_ELEMENTS // max(1, width))
    return [(start, min(per, resamples - start)) for start in range(0, resamples, per)]


def block_bootstrap_draws(
    series_list: Sequence[Sequence[float] | np.ndarray],
    stat: Stat = np.mean,
    *,
    block: int | None = None,
    resamples: int = 2000,
    seed: int | np.random.Generator = 0,
) -> np.ndarray:
    """Bootstrap distribution of `stat` over the pooled series, each resampled in its own blocks.

    Several series (the repeats of one arm) are resampled separately and then concatenated, so a
    block never spans two runs and each run keeps its length (a stratified block bootstrap). NaN
    values are dropped first. `block=1` is the ordinary iid bootstrap.
    """
    parts = [finite(s) for s in series_list]
    parts = [p for p in parts if p.size]
    if not parts:
        raise ValueError("no measured values to resample")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    width = sum(p.size for p in parts)
    out: list[np.ndarray] = []
    for _, count in _row_chunks(resamples, width):
        pieces = [p[block_indices(p.size, block or block_length(p.size), count, rng)]
                  for p in parts]
        sample = pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=1)
        out.append(np.asarray(stat(sample, axis=-1), dtype=float))
    return np.concatenate(out)


def interval_from_draws(estimate: float, draws: np.ndarray, level: float = 0.95) -> Interval:
    """Percentile interval; NaN draws (a resample with nothing to measure) are left out."""
    draws = finite(draws)
    if not draws.size:
        return Interval(estimate, float("nan"), float("nan"))
    alpha = (1 - level) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return Interval(float(estimate), float(low), float(high))


def moving_block_bootstrap(
    series: Sequence[float] | np.ndarray,
    stat: Stat = np.mean,
    block: int | None = None,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """CI of `stat` over one autocorrelated series (circular blocks, NaN ignored).

    `block` defaults to `block_length(n)`. A series of one value gives a zero-width interval.
    """
    x = finite(series)
    if not x.size:
        raise ValueError("no measured values in the series")
    estimate = float(stat(x, axis=-1))
    draws = block_bootstrap_draws([x], stat, block=block, resamples=resamples, seed=seed)
    return interval_from_draws(estimate, draws, level)


def aggregate_rate_ci(
    wall_ms_series: Sequence[float] | np.ndarray,
    *,
    block: int | None = None,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Tokens per second (n / sum of decode wall, wall in ms) with its block-bootstrap CI."""
    return moving_block_bootstrap(wall_ms_series, rate_stat, block, resamples, level, seed)


def repeat_counts(n_repeats: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each repeat is drawn in each resample of whole repeats: (resamples, n_repeats).

    One count matrix applied to two arms is the paired bootstrap: repeat i of both arms is drawn
    together, so a machine state both arms shared cancels in their ratio.
    """
    if n_repeats < 1:
        raise ValueError("need at least one repeat")
    idx = rng.integers(0, n_repeats, size=(resamples, n_repeats))
    return (idx[:, :, None] == np.arange(n_repeats)).sum(axis=1)


def pooled_draws(
    parts: Sequence[Sequence[float] | np.ndarray],
    counts: np.ndarray,
    reduce: Reduce,
    q: float = 50.0,
) -> np.ndarray:
    """The statistic of the pooled values of each resample of whole repeats, without copying.

    Resample i holds every value of repeat r `counts[i, r]` times. `reduce` is "mean",
    "exp_mean" (perplexity from negative log-likelihoods), "rate"
    (1000 x values / sum, tokens per second from ms) or "percentile" (q, 0..100; the same linear
    interpolation np.percentile applies to the copied values). NaN where a resample has no values.
    """
    parts = [finite(p) for p in parts]
    sizes = np.array([p.size for p in parts], dtype=float)
    sums = np.array([p.sum() for p in parts], dtype=float)
    counts = np.asarray(counts, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if reduce == "mean":
            return (counts @ sums) / (counts @ sizes)
        if reduce == "exp_mean":
            return np.exp((counts @ sums) / (counts @ sizes))
        if reduce == "rate":
            return 1000.0 * (counts @ sizes) / (counts @ sums)
    if reduce != "percentile":
        raise ValueError(f"unknown reduction {reduce!r}")
    values = np.concatenate(parts)
    out = np.full(counts.shape[0], np.nan)
    if not values.size:
        return out
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    owner = np.repeat(np.arange(len(parts)), sizes.astype(int))[order]
    last = values.size - 1
    for start, count in _row_chunks(counts.shape[0], values.size):
        rows = slice(start, start + count)
        cum = np.cumsum(counts[rows][:, owner], axis=1)  # copies up to each sorted value
        total = cum[:, -1]
        h = (total - 1) * q / 100.0
        low = np.floor(h)
        # The k-th (0-based) copied value is the first sorted value whose cum exceeds k.
        i_low = np.minimum((cum <= low[:, None]).sum(axis=1), last)
        i_high = np.minimum((cum <= low[:, None] + 1).sum(axis=1), last)
        v_low, v_high = sorted_values[i_low], sorted_values[i_high]
        out[rows] = np.where(total > 0, v_low + (h - low) * (v_high - v_low), np.nan)
    return out


# ---- the correlate view ----------------------------------------------------------------------


def pearson_r(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Pearson correlation over the positions where both are measured; NaN when undefined
    (fewer than two pairs, or a constant series)."""
    x = np.asarray(a, dtype=float).ravel()
    y = np.asarray(b, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"series differ in length ({x.size} vs {y.size})")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 2:
        return float("nan")
    dx, dy = x - x.mean(), y - y.mean()
    denom = np.sqrt((dx * dx).sum() * (dy * dy).sum())
    return float((dx * dy).sum() / denom) if denom > 0 else float("nan")


def normalize(
    series: Sequence[float] | np.ndarray, method: Literal["minmax", "zscore"] = "minmax"
) -> np.ndarray:
    """Put a series on a shared scale: min-max to 0..1, or z-scores. NaN stays NaN.

    A constant series maps to 0.5 (min-max) or 0 (z-score): a flat line, not a division by zero.
    """
    x = np.asarray(series, dtype=float).ravel().copy()
    measured = np.isfinite(x)
    if not measured.any():
        return x
    values = x[measured]
    if method == "minmax":
        lo, hi = values.min(), values.max()
        x[measured] = 0.5 if hi == lo else (values - lo) / (hi - lo)
    elif method == "zscore":
        sd = values.std()
        x[measured] = 0.0 if sd == 0 else (values - values.mean()) / sd
    else:
        raise ValueError(f"unknown normalization {method!r}; use 'minmax' or 'zscore'")
    x[~measured] = np.nan  # infinities are not measurements either
    return x
