"""A number in text for a person: fixed-point while that stays short, never 300 digits.

`f"{x:.0f}"` of 1e300 (a figure read from a hand-edited metrics file, a flag typed as 1e300)
prints every one of its 301 digits; `fixed` prints such a value as 1e+300, and a non-finite one
as "n/a". It imports nothing of the package (it sits at the bottom of the layers).
"""

from __future__ import annotations

import math

PLAIN_LIMIT = 1e15  # past this, fixed-point digits are noise: scientific notation instead


def fixed(value: float, spec: str) -> str:
    """`format(value, spec)` (e.g. ".1f", ",.0f") when |value| < PLAIN_LIMIT; three significant
    digits in scientific notation past it; "n/a" for NaN and infinities."""
    if not math.isfinite(value):
        return "n/a"
    if abs(value) >= PLAIN_LIMIT:
        return f"{value:.3g}"
    return format(value, spec)
