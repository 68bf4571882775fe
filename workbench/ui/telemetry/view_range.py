"""Axis ranges that move in steps while following the newest tokens (Qt-free).

Why steps: every change of a plot's range re-lays out and re-draws its axis text, which costs
more than the curves themselves (tick labels are text, and text is slow to paint). Scrolling by
one token per frame would re-draw all sixteen axes every frame. Paging the x range by a quarter
window, and growing the y range to "nice" ceilings, keeps axes still for most frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FOLLOW_WINDOW = 256  # tokens visible while following
FOLLOW_STEP = 64  # the x range moves by this many tokens at a time
# Robust y: with at least ROBUST_MIN_POINTS visible values, an axis reaches OUTLIER_FACTOR times
# their ROBUST_QUANTILE and no further; what lies above is clipped and flagged (one early 3 s
# token pinned the wall axis at 4000 ms, and later 10 ms tokens lay flat on its floor).
ROBUST_MIN_POINTS = 16
ROBUST_QUANTILE = 0.9
OUTLIER_FACTOR = 4.0


def follow_x_range(first: float, last: float, window: int = FOLLOW_WINDOW,
                   step: int = FOLLOW_STEP) -> tuple[float, float]:
    """The x range showing `last` with room ahead, moving only every `step` tokens: it grows
    in steps from `first` until it is `window` wide, then pages forward."""
    if last - first < window - step:
        width = min(window, (math.floor((last - first) / step) + 2) * step)
        return first - 0.5, first + width - 0.5
    start = math.floor((last - (window - step)) / step) * step + step
    return start - 0.5, start + window - 0.5


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at least `value` (1 for nothing to show)."""
    if not math.isfinite(value) or value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for mantissa in (1, 2, 5, 10):
        ceiling = mantissa * 10.0 ** exponent
        if ceiling >= value * (1 - 1e-9):
            return ceiling
    return 10.0 ** (exponent + 1)


def y_ceiling(columns: list[np.ndarray], cap: float | None = None) -> float:
    """A nice ceiling over the finite values of the visible columns (NaN gaps ignored), never
    above `cap` (a hit rate of 99 % would otherwise get an axis to 200 %)."""
    return y_scale(columns, cap, robust=False).top


@dataclass(frozen=True, slots=True)
class YScale:
    top: float  # the axis' ceiling
    clipped: int  # visible values above it (outliers)
    peak: float  # the largest visible value (NaN: none)


def y_scale(columns: list[np.ndarray], cap: float | None = None,
            robust: bool = True) -> YScale:
    """The axis for the visible columns: a nice ceiling over their values, or, when a few
    outliers stand far above the rest (more than OUTLIER_FACTOR times the ROBUST_QUANTILE),
    over the rest, with the outliers counted as clipped."""
    parts = [col[np.isfinite(col)] for col in columns if col.size]
    values = np.concatenate(parts) if parts else np.empty(0)
    if not values.size:
        return YScale(1.0 if cap is None else min(1.0, cap), 0, math.nan)
    peak = float(values.max())
    ceiling = nice_ceiling(peak * 1.05)
    if robust and values.size >= ROBUST_MIN_POINTS:
        bound = OUTLIER_FACTOR * float(np.quantile(values, ROBUST_QUANTILE))
        if 0 < bound < peak:
            ceiling = nice_ceiling(bound)
    top = ceiling if cap is None else min(ceiling, cap)
    return YScale(top, int((values > top).sum()), peak)
