"""A scored run's cost in words and figures, read back from what the store keeps of it
(Run.quality, written by QualityReport.quality_record): the Runs list's columns, `runs list`,
and the settings panel's "KL 0.031, ppl +2.4 %, 1.9x faster"."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.bench.compare import format_interval
from workbench.bench.stats import Interval

NOT_SCORED = Interval(math.nan, math.nan, math.nan)


def _interval(value: Any) -> Interval:
    try:
        estimate, low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        return NOT_SCORED
    return Interval(estimate, low, high)


@dataclass(frozen=True, slots=True)
class QualityCost:
    """What a setting cost against its lossless reference; NaN figures when not measured."""

    n_positions: int
    ppl: Interval
    ppl_ratio: Interval  # setting / reference, paired
    kl_mean: Interval  # nats
    kl_p95: Interval
    agreement_pct: Interval  # top-1 agreement with the reference, %
    speedup: float  # setting's tok/s / the reference's (NaN when unknown)
    reference: dict[str, Any]  # the reference's settings (those off the defaults)

    @classmethod
    def from_record(cls, quality: Mapping[str, Any] | None) -> QualityCost | None:
        """None for a run that was not scored (its record is {})."""
        figures = (quality or {}).get("figures")
        if not isinstance(figures, Mapping):
            return None
        agree = _interval(figures.get("agreement"))
        speedup = (quality or {}).get("speedup")
        return cls(
            n_positions=int(figures.get("n_positions", 0) or 0),
            ppl=_interval(figures.get("ppl_setting")),
            ppl_ratio=_interval(figures.get("ppl_ratio")),
            kl_mean=_interval(figures.get("kl_mean")),
            kl_p95=_interval(figures.get("kl_p95")),
            agreement_pct=Interval(100 * agree.estimate, 100 * agree.low, 100 * agree.high),
            speedup=float(speedup) if isinstance(speedup, int | float) else math.nan,
            reference=dict((quality or {}).get("reference") or {}),
        )

    def summary(self) -> str:
        """ "KL 0.031, ppl +2.4 %, 1.9x faster" (the panel's words: estimates only)."""
        parts = [f"KL {_g(self.kl_mean.estimate)}"]
        if math.isfinite(self.ppl_ratio.estimate):
            parts.append(f"ppl {100 * (self.ppl_ratio.estimate - 1):+.1f} %")
        if math.isfinite(self.speedup) and self.speedup > 0:
            parts.append(f"{self.speedup:.2g}x faster" if self.speedup >= 1
                         else f"{1 / self.speedup:.2g}x slower")
        return ", ".join(parts)

    def detail(self) -> str:
        """Every figure with its 95 % interval, for a tooltip."""
        return (f"{self.n_positions} positions scored against the lossless reference; "
                f"95 % intervals.\nKL mean {format_interval(self.kl_mean)} nats, p95 "
                f"{format_interval(self.kl_p95)}\nperplexity {format_interval(self.ppl)}, ratio "
                f"{format_interval(self.ppl_ratio)}\ntop-1 agreement "
                f"{format_interval(self.agreement_pct)} %")


def _g(x: float) -> str:
    return "—" if not math.isfinite(x) else f"{x:.2g}" if abs(x) < 0.01 and x else f"{x:.3f}"
