"""Unmeasured becomes NaN, in one place (Qt-free, no numpy).

The engine records what it could not measure as -1 (`metrics.UNMEASURED`), never 0, and no
per-token figure is negative otherwise. What plots, readouts and run lists compute with is a
float where "not measured" is NaN: a gap on a curve, a dash in a readout, never a dip to 0.
Everything that turns a stored or live value into such a float goes through `as_measured`.
"""

from __future__ import annotations

import math


def as_measured(value: object) -> float:
    """`value` as a float; NaN for the -1 sentinel (any negative), None, text and bools."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    value = float(value)
    return math.nan if value < 0 else value
