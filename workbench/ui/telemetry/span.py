"""What a span of tokens cost: the readout for a range selected on the plots (Qt-free).

Rates are aggregates (tokens over summed decode wall), never means of per-token rates, which
would hide the stalls a span is usually selected to look at. Unmeasured values stay out of
the sums, and a figure with nothing measured reads "–".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workbench.engine.summary_labels import RATE


@dataclass(frozen=True, slots=True)
class SpanSummary:
    first_x: int
    last_x: int
    tokens: int
    turns: tuple[int, ...]
    decode_s: float  # summed wall of the measured tokens (NaN: none measured)
    tok_s: float
    median_ms: float
    p95_ms: float
    max_ms: float
    read_mib: float  # NaN when streaming was off
    majflt: float
    hit_from: float  # cumulative hit rate at the span's first and last measured token
    hit_to: float


def summarize_span(data: np.ndarray, index: dict[str, int], lo: float,
                   hi: float) -> SpanSummary | None:
    """The rows of `data` (ring-buffer order, x ascending) with lo <= x <= hi; None if empty."""
    x = data[:, index["x"]]
    rows = data[(x >= lo) & (x <= hi)]
    if not len(rows):
        return None
    wall = _finite(rows[:, index["wall_ms"]])
    decode_s = float(wall.sum()) / 1e3 if len(wall) else math.nan
    hit = _finite(rows[:, index["cache_hit_pct"]])
    return SpanSummary(
        first_x=int(rows[0, index["x"]]), last_x=int(rows[-1, index["x"]]), tokens=len(rows),
        turns=tuple(int(t) for t in np.unique(rows[:, index["turn"]])),
        decode_s=decode_s,
        tok_s=len(wall) / decode_s if len(wall) and decode_s > 0 else math.nan,
        median_ms=float(np.median(wall)) if len(wall) else math.nan,
        p95_ms=float(np.percentile(wall, 95)) if len(wall) else math.nan,
        max_ms=float(wall.max()) if len(wall) else math.nan,
        read_mib=_sum(rows[:, index["read_mib"]]),
        majflt=_sum(rows[:, index["majflt"]]),
        hit_from=float(hit[0]) if len(hit) else math.nan,
        hit_to=float(hit[-1]) if len(hit) else math.nan,
    )


def span_text(span: SpanSummary) -> str:
    """'tokens 40–79 (40, turn 2): 39.2 tok/s over 1.02 s · wall median 25.1 ms, ...'"""
    turns = ", ".join(str(t) for t in span.turns)
    head = (f"tokens {span.first_x}–{span.last_x} ({span.tokens}, "
            f"turn{'s' if len(span.turns) > 1 else ''} {turns})")
    parts = [
        f"{_fmt(span.tok_s, '{:.1f}')} {RATE.unit} over {_fmt(span.decode_s, '{:.2f}')} s",
        f"wall median {_fmt(span.median_ms, '{:.1f}')} ms, p95 {_fmt(span.p95_ms, '{:.1f}')}, "
        f"max {_fmt(span.max_ms, '{:.1f}')}",
        f"read {_fmt(span.read_mib, '{:.1f} MiB')}",
        f"majflt {_fmt(span.majflt, '{:.0f}')}",
        "hit –" if math.isnan(span.hit_from)
        else f"hit {span.hit_from:.1f} → {span.hit_to:.1f} % (cumulative)",
    ]
    return f"{head}: " + " · ".join(parts)


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def _sum(values: np.ndarray) -> float:
    finite = _finite(values)
    return float(finite.sum()) if len(finite) else math.nan


def _fmt(value: float, fmt: str) -> str:
    return "–" if math.isnan(value) else fmt.format(value)
