"""The compare view: overlay plots, the summary table with the configuration difference, and
the correlate view, for two or more runs.

`await view.compare(runs)` draws the table's bootstrap intervals on a worker thread (2000
resamples per figure and arm) and fills the tabs; `show_runs(runs, table)` fills them with a table
computed elsewhere (the bench matrix's, whose arms hold repeats).
"""

from __future__ import annotations

import asyncio

from PySide6.QtWidgets import QLabel, QTabWidget, QVBoxLayout, QWidget

from workbench.bench.compare import CompareTable, RunGroup, compare_arms
from workbench.runs.entries import LoadedRun
from workbench.ui.qt_text_style import SMALL_PX, dim_text
from workbench.ui.runs.qt_config_diff import QtConfigDiff
from workbench.ui.runs.qt_correlate_view import QtCorrelateView
from workbench.ui.runs.qt_overlay_plot import QtOverlayPlot
from workbench.ui.runs.qt_summary_table import QtSummaryTable

EMPTY = "Pick two or more runs in the list and press Compare."


def table_for(runs: list[LoadedRun], resamples: int = 2000) -> CompareTable:
    """One arm per run, labelled as the list labels it (blocking: bootstrap draws)."""
    arms = [RunGroup(run.label, [run.figures()]) for run in runs]  # a scored run's quality too
    return compare_arms(arms, resamples=resamples)


class QtCompareView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[LoadedRun] = []
        self.table: CompareTable | None = None
        self.note = QLabel(EMPTY)
        self.note.setWordWrap(True)
        self.overlay = QtOverlayPlot()
        self.summary = QtSummaryTable()
        self.config_diff = QtConfigDiff()
        self.methods = QLabel()
        self.methods.setWordWrap(True)
        dim_text(self.methods, pixel_size=SMALL_PX)
        summary_page = QWidget()
        column = QVBoxLayout(summary_page)
        column.addWidget(self.summary, 3)
        column.addWidget(self.methods)
        column.addWidget(QLabel("<b>Configuration difference</b>"))
        column.addWidget(self.config_diff, 2)
        self.cause = QLabel()  # which setting a quality difference comes from
        self.cause.setWordWrap(True)
        self.cause.setVisible(False)
        column.addWidget(self.cause)
        self.correlate = QtCorrelateView()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.overlay, "Overlay")
        self.tabs.addTab(summary_page, "Summary")
        self.tabs.addTab(self.correlate, "Correlate")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.tabs, 1)

    async def compare(self, runs: list[LoadedRun]) -> CompareTable:
        self.note.setText(f"Comparing {len(runs)} runs…")
        table = await asyncio.get_running_loop().run_in_executor(None, table_for, runs)
        self.show_runs(runs, table)
        return table

    def show_runs(self, runs: list[LoadedRun], table: CompareTable) -> None:
        self.runs, self.table = list(runs), table
        arms = ", ".join(f"{a.label} ({len(a.runs)} run{'s' if len(a.runs) != 1 else ''})"
                         for a in table.arms)
        self.note.setText(f"{len(table.arms)} arms: {arms}. Ratios are to {table.arms[0].label}; "
                          f"brackets are {100 * table.level:g} % intervals, * marks an interval "
                          "that excludes 1.")
        self.overlay.set_runs(self.runs)
        self.summary.set_table(table)
        self.config_diff.set_table(table)
        self.methods.setText("Intervals: " + "; ".join(table.methods))
        self.cause.setText(table.quality_cause[:1].upper() + table.quality_cause[1:])
        self.cause.setVisible(bool(table.quality_cause))
        self.correlate.set_runs(self.runs)
