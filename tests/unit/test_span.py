"""The cost of a span of tokens selected on the plots: aggregates, inclusive bounds, gaps."""

from __future__ import annotations

import math

import pytest

from workbench.ui.telemetry.ring_buffer import RingBuffer
from workbench.ui.telemetry.series import COLUMNS, row_values
from workbench.ui.telemetry.span import span_text, summarize_span


def ring_of(walls: list[float], turn_of: list[int], streamed: bool = False) -> RingBuffer:
    ring = RingBuffer(64, COLUMNS)
    for x, (wall, turn) in enumerate(zip(walls, turn_of, strict=True)):
        metrics = {"wall_ms": wall, "cpu_ms": wall * 2, "majflt": 1,
                   "read_bytes": (2 << 20) if streamed else -1,
                   "cache_hit_pct": 50.0 + x if streamed else -1}
        ring.append(row_values(metrics.get, x, turn))
    return ring


def test_the_rate_is_tokens_over_summed_wall_not_a_mean_of_rates() -> None:
    # Nine fast tokens and one stall: the mean of per-token rates would say ~90 tok/s.
    ring = ring_of([10.0] * 9 + [1000.0], [0] * 10)
    span = summarize_span(ring.view(), ring.index, 0, 9)
    assert span is not None
    assert span.tokens == 10 and span.decode_s == pytest.approx(1.09)
    assert span.tok_s == pytest.approx(10 / 1.09)
    assert span.max_ms == 1000.0 and span.median_ms == 10.0
    assert span.majflt == 10


def test_bounds_are_inclusive_and_turns_listed() -> None:
    ring = ring_of([20.0] * 8, [0, 0, 0, 1, 1, 1, 2, 2])
    span = summarize_span(ring.view(), ring.index, 2, 4)
    assert span is not None
    assert (span.first_x, span.last_x, span.tokens, span.turns) == (2, 4, 3, (0, 1))
    assert span_text(span).startswith("tokens 2–4 (3, turns 0, 1): 50.0 tok/s over 0.06 s")
    assert summarize_span(ring.view(), ring.index, 20, 30) is None  # past the data


def test_unmeasured_streaming_figures_read_as_gaps_not_zeros() -> None:
    ring = ring_of([20.0] * 5, [0] * 5)
    span = summarize_span(ring.view(), ring.index, 0, 4)
    assert span is not None and math.isnan(span.read_mib) and math.isnan(span.hit_from)
    text = span_text(span)
    assert "read –" in text and text.endswith("hit –")

    streamed = ring_of([20.0] * 5, [0] * 5, streamed=True)
    span = summarize_span(streamed.view(), streamed.index, 1, 3)
    assert span is not None and span.read_mib == 6.0
    assert (span.hit_from, span.hit_to) == (51.0, 53.0)
    assert "read 6.0 MiB" in span_text(span)
    assert span_text(span).endswith("hit 51.0 → 53.0 % (cumulative)")
