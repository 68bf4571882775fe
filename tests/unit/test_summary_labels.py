"""The summary figures' names and units are one table (engine/summary_labels.py), and the views
that show them read it: the headline, the compare figures, the chat's stats line, `runs show`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import workbench
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


# Where a turn's summary figures are shown: the window, the stats line, `runs`, the compare
# figures. Their names come from the table; a string literal naming one there is a copy.
VIEWS = ("workbench/ui", "workbench/store/stats_line.py", "workbench/cli/runs.py",
         "workbench/bench/figures.py", "workbench/runs")
# Names a hand-written copy would use: each figure's own label and (specific) unit, and the
# synonyms the views used before the table; whole words ("ttft_s" is a key, not a name).
HAND_WRITTEN = re.compile("|".join(rf"(?<!\w){re.escape(name)}(?!\w)" for name in sorted({
    *(f.label for f in FIGURES if f is not summary_labels.PREFILL_RATE),  # "prefill" is prose
    *(f.unit for f in FIGURES if f.unit not in ("s", "%", "MiB")),
    "hit rate"})), re.IGNORECASE)
# Not a turn's summary figure: the hit rate an LRU replay expects at a given cache size.
NOT_SUMMARY = {("workbench/ui/qt_replay_plot.py", "hit rate"),
               ("workbench/ui/telemetry/qt_cache_sizing.py", "hit rate")}
PROSE_KEYWORDS = {"help", "description", "epilog"}  # a command's help text
PROSE_CALLS = {"setToolTip", "setWhatsThis"}


def hand_written_names(path: str, source: str) -> list[str]:
    """'path:line: "literal"' for each string literal that names a summary figure (prose
    aside: docstrings, help texts, tooltips)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    # Help texts and tooltips are sentences about the figures, not their names.
    texts = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.keyword) and node.arg in PROSE_KEYWORDS]
    texts += [arg for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute) and node.func.attr in PROSE_CALLS
              for arg in node.args]
    prose = docstrings | {id(part) for text in texts for part in ast.walk(text)}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in prose):
            for match in HAND_WRITTEN.finditer(node.value):
                if (path, match.group().lower()) not in NOT_SUMMARY:
                    found.append(f"{path}:{node.lineno}: {node.value!r}")
    return found


def view_sources() -> list[tuple[str, str]]:
    root = Path(workbench.__file__).parent.parent
    files = []
    for view in VIEWS:
        path = root / view
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [(str(f.relative_to(root)), f.read_text(encoding="utf-8")) for f in files]


def test_no_view_names_a_summary_figure_by_hand():
    sources = view_sources()
    assert len(sources) > 50  # the window's modules were found
    found = [line for path, source in sources for line in hand_written_names(path, source)]
    assert not found, "name these from engine/summary_labels.py:\n" + "\n".join(found)


@pytest.mark.parametrize("literal", ['"– tok/s"', 'f"{rate:.1f} tok/s"', '"TTFT s"',
                                     '("tok_s", "Hit rate")', '"experts read"'])
def test_a_hand_written_figure_name_is_found(literal):
    """Negative control: what the views wrote before the table is caught, docstrings are not."""
    docstring = '"""A view of tok/s and TTFT."""\n'
    assert hand_written_names("workbench/ui/x.py", docstring) == []
    found = hand_written_names("workbench/ui/x.py", f"{docstring}LABEL = {literal}\n")
    assert found and all(line.startswith("workbench/ui/x.py:2: ") for line in found)
    # ...and an exempt phrase only in its own module.
    assert hand_written_names("workbench/ui/qt_replay_plot.py", 'T = "hit rate"\n') == []
    assert hand_written_names("workbench/ui/x.py", 'T = "hit rate"\n')
    assert hand_written_names("workbench/cli/x.py", 'p.add_parser("x", help="tok/s")\n') == []


def test_the_window_shows_the_tables_names():
    from workbench.engine import metric_labels
    from workbench.ui.qt_status_bar import rate_text
    from workbench.ui.runs.qt_runs_table_model import COLUMNS
    from workbench.ui.telemetry.series import PLOTS

    assert rate_text(-1.0) == f"– {RATE.unit}" and rate_text(12.34) == f"12.3 {RATE.unit}"
    headings = dict(COLUMNS)
    assert (headings["tok_s"], headings["ttft_s"]) == (RATE.unit, TTFT.heading)
    legends = {curve.column: curve.name for spec in PLOTS for curve in spec.curves}
    assert legends["cache_hit_pct"] == metric_labels.label("cache_hit_pct")
    # Every curve of a figure the metric table names is called by that name (or its short one).
    for column, name in legends.items():
        if column in metric_labels.BY_NAME:
            shown = metric_labels.BY_NAME[column]
            assert name in (shown.label, shown.short), column
