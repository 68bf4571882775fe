"""Axis ranges that move in steps while following the newest tokens (Qt-free).

Why steps: every change of a plot's range re-lays out and re-draws its axis text, which costs
more than the curves themselves (tick labels are text, and text is slow to paint). Scrolling by
one token per frame would re-draw all sixteen axes every frame. Paging the x range by a quarter
window, and growing the y range to "nice" ceilings, keeps axes still for most frames.
"""

from __future__ import annotations

import math

import numpy as np

FOLLOW_WINDOW = 256  # tokens visible while following
FOLLOW_STEP = 64  # the x range moves by this many tokens at a time


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
    peak = 0.0
    for col in columns:
        if col.size and np.isfinite(col).any():
            peak = max(peak, float(np.nanmax(col)))
    ceiling = nice_ceiling(peak * 1.05)
    return ceiling if cap is None else min(ceiling, cap)
