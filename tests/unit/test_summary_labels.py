"""The summary figures' names and units are one table (engine/summary_labels.py), and the views
that show them read it: the headline, the compare figures, the chat's stats line, `runs show`."""

from __future__ import annotations

import pytest

from workbench.bench.figures import FIGURE_BY_KEY
from workbench.cli import runs as runs_cli
from workbench.engine import summary_labels
from workbench.engine.summary_labels import (
    CACHE_HIT,
    FIGURES,
    RATE,
    TTFT,
    SummaryFigure,
    SummaryLabelsDrift,
)
from workbench.store.message_stats import MessageStats
from workbench.store.stats_line import format_stats_line
from workbench.ui.telemetry.headline import Headline


def test_every_figure_names_a_summary_attribute():
    summary_labels._check(FIGURES)  # what import ran; here so a failure names this test


def test_a_figure_naming_no_summary_attribute_is_refused():
    """Negative control: a renamed RunSummary field must fail at import, not in a view."""
    with pytest.raises(SummaryLabelsDrift, match="tok_per_s"):
        summary_labels._check((*FIGURES, SummaryFigure("tok_per_s", "decode rate", "tok/s")))


def test_the_views_take_their_names_from_the_table():
    assert (FIGURE_BY_KEY["tok_s"].label, FIGURE_BY_KEY["tok_s"].unit) == (RATE.label, RATE.unit)
    assert (FIGURE_BY_KEY["ttft_s"].label, FIGURE_BY_KEY["ttft_s"].unit) == (TTFT.label,
                                                                              TTFT.unit)
    assert FIGURE_BY_KEY["hit_pct"].label == CACHE_HIT.label
    names = [name for name, _ in Headline(tok_s=10.0, ttft_s=0.5, prefill_tok_s=80).items()]
    assert names[:3] == [RATE.unit, TTFT.label, summary_labels.PREFILL_RATE.label]
    headings = {label for _, label, _ in runs_cli._SUMMARY}
    # `runs show` lists the prompt's own figures (tokens prefilled, seconds), not its rate.
    assert {f.heading for f in FIGURES if f is not summary_labels.PREFILL_RATE} <= headings
    line = format_stats_line(MessageStats(tok_s=12.5, ttft_s=0.25, cache_hit_pct=90.0))
    assert f"{TTFT.label} 0.25 {TTFT.unit}" in line and f"{CACHE_HIT.label} 90" in line
