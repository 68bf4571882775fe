"""What every view calls a turn's summary figures (decode rate, TTFT, prefill rate, cache hit,
experts read), and their units: one entry per figure, for the window's headline, the compare
table's figures and `workbench runs`, as metric_labels.py is for the per-token columns.

Each entry names the `RunSummary` attribute it shows (checked at import), so a renamed field
fails here, not in a view. A figure's unit is declared once: the cache hit's is the metric
table's column unit (`metric_columns.SPECS`), the others' are the summary's own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from workbench.engine import metric_columns
from workbench.engine.metrics import RunSummary


@dataclass(frozen=True, slots=True)
class SummaryFigure:
    source: str  # the RunSummary attribute (or property) it shows
    label: str  # what a table or a list calls it: "decode rate"
    unit: str  # "tok/s", "s", "%", "MiB"

    @property
    def heading(self) -> str:
        """A column heading or a line's name with its unit: "TTFT s"."""
        return f"{self.label} {self.unit}"


RATE = SummaryFigure("tokens_per_second", "decode rate", "tok/s")
TTFT = SummaryFigure("ttft_seconds", "TTFT", "s")
PREFILL_RATE = SummaryFigure("prefill_tokens_per_second", "prefill", "tok/s")
CACHE_HIT = SummaryFigure("cache_hit_pct", "cache hit",
                          metric_columns.BY_NAME["cache_hit_pct"].unit)
EXPERTS_READ = SummaryFigure("moe_read_mib", "experts read", "MiB")
FIGURES: tuple[SummaryFigure, ...] = (RATE, TTFT, PREFILL_RATE, CACHE_HIT, EXPERTS_READ)


class SummaryLabelsDrift(RuntimeError):
    """A summary figure names an attribute RunSummary does not have."""


def _check(figures: tuple[SummaryFigure, ...] = FIGURES) -> None:
    known = {f.name for f in dataclasses.fields(RunSummary)} | {
        name for name, value in vars(RunSummary).items() if isinstance(value, property)}
    missing = [f.source for f in figures if f.source not in known]
    if missing:
        raise SummaryLabelsDrift(f"summary figures name no RunSummary attribute: {missing}")


_check()
