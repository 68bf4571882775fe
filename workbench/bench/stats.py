"""Bootstrap statistics for benchmark figures (pure functions, numpy only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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
