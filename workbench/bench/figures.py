"""The summary figures of one run, read from its metrics file (ours or upstream v1/v2).

A run's figures come from series: per-token decode times, read bytes and faults (one value per
generated token), one TTFT per turn, and the run's final cache hit rate. Columns are read by name,
and everything unmeasured (-1, an absent column, upstream's zeros on platforms that cannot
measure) becomes NaN here and "—" in the table, never 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from workbench.bench.stats import Reduce, Stat, reduce_stat
from workbench.engine import metric_columns
from workbench.engine.metrics_reader import MetricsFile, column, read_metrics_csv
from workbench.engine.summary_labels import CACHE_HIT, RATE, TTFT

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Figure:
    """One row of the compare table: which series it reduces, and how."""

    key: str
    label: str
    unit: str
    series: str  # a RunFigures.series key
    kind: Literal["token", "turn", "run"]  # what one value of the series is
    reduce: Reduce  # over all values of an arm's runs pooled together
    better: Literal["higher", "lower"]
    q: float = 50.0  # the percentile, for reduce="percentile"

    @property
    def stat(self) -> Stat:
        return reduce_stat(self.reduce, self.q)


def per_token_unit(column: str) -> str:
    """A per-token column's unit as one token's share reads: "ms/token"; a count, "/token"."""
    unit = metric_columns.BY_NAME[column].unit
    return "/token" if unit == "count" else f"{unit}/token"


def _of_column(key: str, label: str, column: str, reduce: Reduce,
               better: Literal["higher", "lower"], q: float = 50.0) -> Figure:
    """A figure over one per-token column as the file has it: its series is the column, and its
    unit the column's unit per token (metric_columns.py), not restated here."""
    return Figure(key, label, per_token_unit(column), column, "token", reduce, better, q)


FIGURES: tuple[Figure, ...] = (
    # A rate over the decode wall: its unit is the rate's, not the column's.
    Figure("tok_s", RATE.label, RATE.unit, "wall_ms", "token", "rate", "higher"),
    _of_column("median_ms", "median", "wall_ms", "percentile", "lower", 50),
    _of_column("p95_ms", "p95", "wall_ms", "percentile", "lower", 95),
    _of_column("p99_ms", "p99", "wall_ms", "percentile", "lower", 99),
    Figure("ttft_s", TTFT.label, TTFT.unit, "ttft_s", "turn", "mean", "lower"),
    # read_bytes in MiB (RunFigures.from_metrics converts it).
    Figure("read_mib", "read", "MiB/token", "read_mib", "token", "mean", "lower"),
    # The run's last cumulative hit rate, in the column's unit.
    Figure("hit_pct", CACHE_HIT.label, CACHE_HIT.unit, "hit_pct", "run", "mean", "higher"),
    _of_column("faults", "major faults", "majflt", "mean", "lower"),
)
# A scored run's quality figures (bench/quality.py), over its per-position series (one value per
# scored position, kept in the store as Run.quality["series"]). The compare table shows them only
# when an arm was scored; a run that was not has empty series and shows "—".
QUALITY_FIGURES: tuple[Figure, ...] = (
    Figure("ppl", "perplexity", "", "nll", "token", "exp_mean", "lower"),
    Figure("kl_mean", "KL mean", "nats", "kl", "token", "mean", "lower"),
    Figure("kl_p95", "KL p95", "nats", "kl", "token", "percentile", "lower", 95),
    Figure("agree_pct", "top-1 agreement", "%", "agree_pct", "token", "mean", "higher"),
)
QUALITY_SERIES = tuple(dict.fromkeys(f.series for f in QUALITY_FIGURES))
FIGURE_BY_KEY = {f.key: f for f in (*FIGURES, *QUALITY_FIGURES)}


def _is_ours(mf: MetricsFile) -> bool:
    return mf.preamble.get("wb_engine") == "workbench"


def _decode_ms(mf: MetricsFile) -> np.ndarray:
    """Per-token decode wall. A speculative group (upstream mtp_batch > 1) bills its whole decode
    to the first row and 0 to the others; each of its tokens gets an equal share instead."""
    wall = np.asarray(column(mf, "wall_ms"), dtype=float)
    batch = np.asarray(column(mf, "mtp_batch"), dtype=float)
    i = 0
    while i < wall.size:
        b = int(batch[i]) if math.isfinite(batch[i]) and batch[i] > 1 else 1
        if b > 1:
            group = wall[i:i + b]
            group[:] = np.nansum(group) / group.size
        i += b
    return wall


def _turn_ids(mf: MetricsFile) -> np.ndarray:
    turns = np.asarray(column(mf, "turn"), dtype=float)
    return np.where(np.isfinite(turns), turns, -1.0)


def _keep_mask(mf: MetricsFile, wall: np.ndarray, trim: int) -> np.ndarray:
    """Measured decode rows, minus the first `trim` tokens of every turn (warm-up)."""
    turns = _turn_ids(mf)
    keep = np.isfinite(wall)
    if trim > 0:
        position = np.zeros(wall.size, dtype=int)
        seen: dict[float, int] = {}
        for i, t in enumerate(turns):
            position[i] = seen.get(t, 0)
            seen[t] = position[i] + 1
        keep &= position >= trim
    return keep


def _streaming_off_upstream(mf: MetricsFile) -> bool:
    # Upstream writes 0 (not -1) for read bytes when streaming is off: nothing was measured.
    return not _is_ours(mf) and mf.preamble.get("moe_stream") == "0"


def _counters_unmeasured_upstream(mf: MetricsFile) -> bool:
    # Upstream writes 0 fault and CPU counters where the platform cannot read them; a decode
    # never takes zero CPU, so an all-zero cpu_ms column means the counters were not read.
    if _is_ours(mf):
        return False
    cpu = np.asarray(column(mf, "cpu_ms"), dtype=float)
    return bool(cpu.size) and bool(np.all(cpu[np.isfinite(cpu)] == 0))


def _ttft_per_turn(mf: MetricsFile) -> np.ndarray:
    """Ours: `ttft_s`. Upstream files lack it; their `prefill_s` is the same span without our
    template rendering (upstream's own TTFT also adds model load, which is not per turn)."""
    out = []
    for summary in mf.summaries:
        value = summary.get("ttft_s", summary.get("prefill_s"))
        ok = isinstance(value, int | float) and value != -1 and math.isfinite(value)
        out.append(float(value) if ok else math.nan)
    return np.asarray(out, dtype=float)


def _final_hit_pct(mf: MetricsFile) -> float:
    """cache_hit_pct is cumulative, so the run's rate is its last measured value."""
    if mf.summaries:
        value = mf.summaries[-1].get("cache_hit_pct")
        if isinstance(value, int | float) and value != -1:
            return float(value)
    hits = [v for v in column(mf, "cache_hit_pct") if math.isfinite(v)]
    return hits[-1] if hits else math.nan


def _config_text(name: str, value: object) -> str:
    if name == "model" and isinstance(value, str):
        return Path(value).name or value  # the directory says nothing about the run
    return value if isinstance(value, str) else json.dumps(value)


def run_config(mf: MetricsFile) -> dict[str, str]:
    """What produced the run, as text: our settings (plus engine and model identity), or, for
    upstream files, every preamble key."""
    if mf.settings:
        config = {k: _config_text(k, v) for k, v in sorted(mf.settings.items())}
        config.update({k: v for k, v in mf.preamble.items()
                       if k.startswith("wb_") and k not in ("wb_settings", "wb_engine")})
        return config
    return dict(mf.preamble)


def quality_series(quality: Mapping[str, Any] | None,
                   names: tuple[str, ...] = QUALITY_SERIES) -> dict[str, np.ndarray]:
    """The per-position series (the quality figures' by default) from a scored run's record
    (empty for any other run)."""
    stored = (quality or {}).get("series")
    return {name: _floats(stored.get(name) if isinstance(stored, Mapping) else None)
            for name in names}


def _floats(values: object) -> np.ndarray:
    """A stored series as floats; one that is not a list of numbers (a damaged or hand-edited
    record) reads as not scored rather than failing the whole compare."""
    try:
        return np.asarray(values if values is not None else (), dtype=float).ravel()
    except (TypeError, ValueError):
        return np.empty(0)


@dataclass
class RunFigures:
    """One metrics file reduced to the series the compare table needs."""

    source: str
    label: str
    format: str
    preamble: dict[str, str]
    config: dict[str, str]
    has_settings: bool
    trim: int
    series: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_metrics(
        cls, mf: MetricsFile, trim: int = 0, *, source: str = "", label: str = "",
        quality: Mapping[str, Any] | None = None,
    ) -> RunFigures:
        """`quality`: a scored run's record (Run.quality), whose per-position series become the
        quality figures' (never trimmed: every scored position is a measurement)."""
        if trim < 0:
            raise ValueError("trim must be 0 or more tokens")
        wall = _decode_ms(mf)
        keep = _keep_mask(mf, wall, trim)
        read = np.asarray(column(mf, "read_bytes"), dtype=float) / MIB
        if _streaming_off_upstream(mf):
            read[:] = math.nan
        faults = np.asarray(column(mf, "majflt"), dtype=float)
        if _counters_unmeasured_upstream(mf):
            faults[:] = math.nan
        return cls(
            source=source,
            label=label or (Path(source).stem if source else "run"),
            format=mf.format,
            preamble=dict(mf.preamble),
            config=run_config(mf),
            has_settings=bool(mf.settings),
            trim=trim,
            series={
                "wall_ms": wall[keep],
                "read_mib": read[keep],
                "majflt": faults[keep],
                "ttft_s": _ttft_per_turn(mf),
                "hit_pct": np.asarray([_final_hit_pct(mf)]),
                **quality_series(quality),
            },
        )

    @classmethod
    def from_csv(cls, path: str | Path, trim: int = 0, *, label: str = "") -> RunFigures:
        return cls.from_metrics(read_metrics_csv(path), trim, source=str(path), label=label)

    @property
    def scored(self) -> bool:
        return any(self.series.get(name, np.empty(0)).size for name in QUALITY_SERIES)

    @property
    def n_tokens(self) -> int:
        """Decode tokens the figures use (after the warm-up trim)."""
        return int(self.series["wall_ms"].size)

    @property
    def group_key(self) -> str:
        """Equal for runs of the same configuration: the whole preamble (settings, model
        identity, engine version), which holds no per-run facts such as times."""
        return json.dumps(self.preamble, sort_keys=True)

    def values(self, figure: Figure) -> np.ndarray:
        return self.series[figure.series]

    def estimate(self, figure: Figure) -> float:
        return pooled_estimate([self], figure)


def pooled_estimate(runs: list[RunFigures], figure: Figure) -> float:
    """The figure over several runs taken together (tok/s = all tokens / all decode wall)."""
    values = np.concatenate([r.values(figure) for r in runs])
    values = values[np.isfinite(values)]
    return float(figure.stat(values, axis=-1)) if values.size else math.nan

