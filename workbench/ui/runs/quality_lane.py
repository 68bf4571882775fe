"""The per-position quality of a scored run as a lane of the compare view's plots (Qt-free).

A scored run (`workbench score`, Price it) keeps per-position series (Run.quality["series"]);
its token rows are its positions in the same order, so x is shared: the KL lane lines up under
the run's wall time and reads. A brushed stretch (Shift+drag, or the worst one found for you)
is summarised with the text it covers, so a bad stretch of text can be found and read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workbench.bench.figures import quality_series
from workbench.runs.entries import LoadedRun
from workbench.ui.runs.curves import Metric, series

QUALITY_METRICS: tuple[Metric, ...] = (
    Metric("kl", "KL per position", "nats"),
    Metric("nll", "surprise (-log p of the next token)", "nats"),
)
QUALITY_KEYS = frozenset(m.key for m in QUALITY_METRICS)
WORST_WIDTH = 16  # positions in the stretch "Worst stretch" picks
TEXT_CHARS = 160  # of a stretch's text shown


def run_series(run: LoadedRun, key: str) -> np.ndarray:
    """A per-position series: quality keys from the stored run's series (empty for a run that
    was not scored), the rest from its metrics file."""
    if key in QUALITY_KEYS:
        return quality_series(run.quality, (key,))[key]
    return series(run.metrics, key)


def scored_metrics(runs: list[LoadedRun]) -> list[Metric]:
    """The quality lanes some run has."""
    return [m for m in QUALITY_METRICS if any(run_series(r, m.key).size for r in runs)]


@dataclass(frozen=True, slots=True)
class Stretch:
    label: str
    first: int
    last: int
    kl_mean: float  # NaN: the run was not scored
    kl_max: float
    wall_ms: float  # mean decode wall over the stretch
    text: str  # the text of the positions' next tokens

    def line(self) -> str:
        kl = ("not scored" if math.isnan(self.kl_mean)
              else f"KL mean {self.kl_mean:.4g}, max {self.kl_max:.4g} nats")
        wall = "" if math.isnan(self.wall_ms) else f", wall {self.wall_ms:.3g} ms/token"
        text = self.text if len(self.text) <= TEXT_CHARS else self.text[:TEXT_CHARS] + "…"
        return (f"{self.label}, positions {self.first}–{self.last}: {kl}{wall}"
                + (f"\n    “{text}”" if text else ""))


def stretch(run: LoadedRun, first: int, last: int) -> Stretch | None:
    """What positions first..last of the run cost, with their text; None if it has none."""
    n = len(run.metrics.rows)
    first, last = max(0, first), min(n - 1, last)
    if last < first:
        return None
    kl = run_series(run, "kl")[first:last + 1]
    wall = series(run.metrics, "wall_ms")[first:last + 1]
    wall = wall[np.isfinite(wall)]
    text = "".join(str(r.get("piece", "") or "") for r in run.metrics.rows[first:last + 1])
    return Stretch(run.label, first, last,
                   float(kl.mean()) if kl.size else math.nan,
                   float(kl.max()) if kl.size else math.nan,
                   float(wall.mean()) if wall.size else math.nan,
                   " ".join(text.split()))


def worst_stretch(kl: np.ndarray, width: int = WORST_WIDTH) -> tuple[int, int] | None:
    """The `width` consecutive positions with the highest mean KL (the first such), or None."""
    if kl.size == 0:
        return None
    width = min(width, kl.size)
    sums = np.convolve(kl, np.ones(width), mode="valid")
    first = int(np.argmax(sums))
    return first, first + width - 1
