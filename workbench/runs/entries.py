"""The runs list's rows: stored runs and imported metrics files as one kind of record, and
the filters that narrow them (Qt-free).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from workbench.bench.figures import FIGURES, RunFigures
from workbench.bench.quality_cost import QualityCost
from workbench.engine.measured import as_measured
from workbench.engine.metrics_reader import MetricsFile
from workbench.store import Run

Kind = Literal["chat", "headless", "imported"]
KINDS: tuple[str, ...] = ("all", "chat", "headless", "imported")
_RATE = next(f for f in FIGURES if f.key == "tok_s")
_TTFT = next(f for f in FIGURES if f.key == "ttft_s")
_READ = next(f for f in FIGURES if f.key == "read_mib")


@dataclass(frozen=True)
class RunEntry:
    key: str  # "run:12" for a stored run, "csv:/path/file.csv" for an imported file
    label: str  # short: "#12", or the file's stem
    kind: Kind
    created_at: float  # Unix seconds; an imported file's modification time
    model: str
    n_tokens: int
    tok_s: float  # NaN when unmeasured
    ttft_s: float
    settings: dict[str, Any] = field(default_factory=dict)
    run_id: int | None = None
    path: str | None = None
    read_mib: float = math.nan  # expert reads per token, MiB
    cost: QualityCost | None = None  # a scored run's quality figures


_unmeasured = as_measured


def entry_from_run(run: Run) -> RunEntry:
    s = run.summary
    summary = run.run_summary()
    return RunEntry(
        key=f"run:{run.id}", label=f"#{run.id}" + (f" {run.label}" if run.label else "")
        + (" (interrupted)" if run.interrupted else ""),
        kind="headless" if run.message_id is None else "chat", created_at=run.created_at,
        model=str(run.model.get("name") or Path(str(run.model.get("path", ""))).name),
        n_tokens=run.n_token_rows,
        tok_s=_unmeasured(summary.tokens_per_second) if summary else math.nan,
        ttft_s=_unmeasured(s.get("ttft_seconds")), settings=dict(run.settings), run_id=run.id,
        read_mib=_unmeasured(summary.moe_read_mib / summary.n_generated)
        if summary and summary.n_generated > 0 and summary.moe_read_mib >= 0 else math.nan,
        cost=QualityCost.from_record(run.quality))


def entry_from_csv(path: str | Path, mf: MetricsFile) -> RunEntry:
    p = Path(path)
    figures = RunFigures.from_metrics(mf, source=str(p))
    model = mf.preamble.get("wb_model_name") or mf.preamble.get("model", "")
    return RunEntry(
        key=f"csv:{p.resolve()}", label=p.stem, kind="imported", created_at=p.stat().st_mtime,
        model=model, n_tokens=len(mf.rows), tok_s=figures.estimate(_RATE),
        ttft_s=figures.estimate(_TTFT), settings=dict(mf.settings), path=str(p.resolve()),
        read_mib=figures.estimate(_READ))


@dataclass(frozen=True)
class RunFilters:
    model: str = ""  # "" = every model
    since: float | None = None  # Unix seconds, inclusive
    until: float | None = None
    kind: str = "all"  # one of KINDS

    def store_kwargs(self) -> dict[str, Any]:
        """Store.list_runs arguments for the stored runs these filters keep."""
        kwargs: dict[str, Any] = {"since": self.since, "until": self.until}
        if self.model:
            kwargs["model_name"] = self.model
        if self.kind in ("chat", "headless"):
            kwargs["headless"] = self.kind == "headless"
        return kwargs

    @property
    def wants_stored(self) -> bool:
        return self.kind != "imported"

    def keeps(self, entry: RunEntry) -> bool:
        """Whether an in-memory entry (an imported file) passes."""
        return ((self.kind in ("all", entry.kind))
                and (not self.model or entry.model == self.model)
                and (self.since is None or entry.created_at >= self.since)
                and (self.until is None or entry.created_at <= self.until))


@dataclass
class LoadedRun:
    """A run ready to compare: its metrics file as read, with a short label."""

    label: str
    metrics: MetricsFile
    source: str = ""  # the file, or "" for a stored run
    quality: dict[str, Any] = field(default_factory=dict)  # a scored run's (Run.quality)

    def figures(self, trim: int = 0) -> RunFigures:
        return RunFigures.from_metrics(self.metrics, trim, source=self.source, label=self.label,
                                       quality=self.quality)
