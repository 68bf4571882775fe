"""A scored run's cost in words and figures, read back from what the store keeps of it
(Run.quality, written by QualityReport.quality_record): the Runs list's columns, `runs list`,
and the settings panel's "KL 0.031, ppl +2.4 %, 1.9x faster" (`measured_cost` finds the run
that priced a configuration)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.bench.compare import format_interval
from workbench.bench.lossy import LOSSY_NAMES
from workbench.bench.stats import Interval
from workbench.config import SETTINGS, Config

_DEFAULTS = {s.name: s.default for s in SETTINGS}

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


@dataclass(frozen=True, slots=True)
class MeasuredCost:
    """The last scored run of a configuration's lossy levers on a model, and its cost."""

    run_id: int
    created_at: float
    cost: QualityCost
    settings: dict[str, Any]  # the scored run's every setting (its cache, its threads)

    def tooltip(self) -> str:
        cache = self.settings.get("cache_mb")
        where = f", expert cache {cache} MiB" if self.settings.get("moe_stream") else ""
        return f"Measured by run #{self.run_id}{where}.\n{self.cost.detail()}"


def _same_model(settings: Mapping[str, Any], model: str) -> bool:
    stored = str(settings.get("model") or "")
    if stored == model:  # "" is the bundled model
        return True
    if not stored or not model:
        return False
    return Path(stored).expanduser().resolve() == Path(model).expanduser(
    ).resolve()


def measured_cost(runs: Iterable[Any], config: Config) -> MeasuredCost | None:
    """The newest scored run (store Runs, newest first) of `config`'s model whose lossy levers
    all equal `config`'s: what the settings panel shows as their cost. None: not measured.
    Lossless settings (cache size, policy, threads) may differ: they change speed, not what the
    model computes, and the tooltip names the cache the run had."""
    for run in runs:
        cost = QualityCost.from_record(getattr(run, "quality", None))
        if cost is None or not _same_model(run.settings, config.model):
            continue
        if all(run.settings.get(n, _DEFAULTS[n]) == getattr(config, n) for n in LOSSY_NAMES):
            return MeasuredCost(int(run.id), float(run.created_at), cost, dict(run.settings))
    return None
