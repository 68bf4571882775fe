"""Per-token series of a metrics file for the overlay and correlate views (Qt-free).

x is the token's index in the file (0, 1, 2...), shared by every run. Unmeasured values are
NaN, so a curve drawn with connect="finite" shows a gap where nothing was measured, never a
dip to 0. Upstream files write 0 for some values they could not measure (docs/telemetry.md,
"Reading upstream files"): those columns, when all zero in an upstream file, are unmeasured,
and the compare table's own rules (workbench/bench/figures.py) apply as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from workbench.bench.figures import (
    MIB,
    _counters_unmeasured_upstream,
    _streaming_off_upstream,
)
from workbench.bench.stats import normalize, pearson_r
from workbench.engine import metric_labels
from workbench.engine.metrics_reader import MetricsFile, column


@dataclass(frozen=True, slots=True)
class Metric:
    key: str  # a column name, or a derived series ("read_mib")
    label: str
    unit: str


# The figures the overlay and correlate views offer, in this order; their labels and units
# are the metric table's (engine/metric_labels.py).
_KEYS = ("wall_ms", "cpu_ms", "compute_ms", "io_ms", "stall_ms", "mgmt_ms", "loop_overhead_ms",
         "read_mib", "cache_hit_pct", "majflt", "majflt_mib", "rss_mib", "rss_anon_mib",
         "rss_file_mib", "mem_available_mib", "swap_mib", "cache_budget_mib",
         "dense_resident_frac")
METRICS: tuple[Metric, ...] = tuple(Metric(k, metric_labels.label(k), metric_labels.unit(k))
                                    for k in _KEYS)
BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}
_COUNTERS = frozenset({"majflt", "majflt_mib", "cpu_ms"})
# Upstream writes 0 here when it cannot measure (serial mode, streaming off, Windows probes).
_ZERO_IS_UNMEASURED = frozenset({"stall_ms", "io_ms", "mgmt_ms", "cache_budget_mib", "cpu_ms",
                                 "majflt", "majflt_mib", "rss_mib", "rss_anon_mib",
                                 "rss_file_mib"})


def _is_ours(mf: MetricsFile) -> bool:
    return mf.preamble.get("wb_engine") == "workbench"


def series(mf: MetricsFile, key: str) -> np.ndarray:
    """One per-token series, NaN where unmeasured (an absent column is all NaN)."""
    if key == "read_mib":
        y = np.asarray(column(mf, "read_bytes"), dtype=float) / MIB
        if _streaming_off_upstream(mf):
            y[:] = math.nan
        return y
    y = np.asarray(column(mf, key), dtype=float)
    if key in _COUNTERS and _counters_unmeasured_upstream(mf):
        y[:] = math.nan
    if key in _ZERO_IS_UNMEASURED and not _is_ours(mf):
        measured = y[np.isfinite(y)]
        if measured.size and not measured.any():
            y[:] = math.nan
    return y


def token_index(mf: MetricsFile) -> np.ndarray:
    return np.arange(len(mf.rows), dtype=float)


def measured_metrics(files: list[MetricsFile]) -> list[Metric]:
    """The metrics at least one of the files measured, in METRICS order."""
    return [m for m in METRICS
            if any(np.isfinite(series(mf, m.key)).any() for mf in files)]


@dataclass(frozen=True, slots=True)
class Correlation:
    metric: Metric
    normalized: np.ndarray  # on the shared 0..1 (min-max) or z-score scale
    r: float  # Pearson r against the pivot over tokens where both are measured; NaN: undefined

    @property
    def legend(self) -> str:
        r = "r = —" if math.isnan(self.r) else f"r = {self.r:+.2f}"
        return f"{self.metric.label} ({r})"


def correlate(mf: MetricsFile, keys: list[str], pivot: str,
              method: Literal["minmax", "zscore"] = "minmax") -> list[Correlation]:
    """Each chosen metric normalized, with its correlation to the pivot metric."""
    base = series(mf, pivot)
    out = []
    for key in dict.fromkeys([pivot, *keys]):
        y = series(mf, key)
        out.append(Correlation(BY_KEY[key], normalize(y, method), pearson_r(y, base)))
    return out
