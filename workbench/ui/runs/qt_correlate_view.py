"""Several metrics of one run normalized onto one canvas, each labelled with its Pearson r
against a pivot metric: what moves with the decode time, and what does not."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.runs.entries import LoadedRun
from workbench.ui.runs.curves import Correlation, correlate, measured_metrics, token_index
from workbench.ui.runs.palette import colour
from workbench.ui.runs.qt_themed_plot import QtThemedPlot

DEFAULT_PIVOT = "wall_ms"
DEFAULT_CHECKED = ("cpu_ms", "read_mib", "majflt", "rss_mib", "mem_available_mib")
METHODS = (("min-max (0..1)", "minmax"), ("z-score", "zscore"))


class QtCorrelateView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[LoadedRun] = []
        self.correlations: list[Correlation] = []
        self.run = QComboBox()
        self.pivot = QComboBox()
        self.method = QComboBox()
        for text, key in METHODS:
            self.method.addItem(text, key)
        self.metrics = QListWidget()
        self.metrics.setMaximumWidth(230)
        self.run.currentIndexChanged.connect(lambda _: self._run_changed())
        for combo in (self.pivot, self.method):
            combo.currentIndexChanged.connect(lambda _: self._draw())
        self.metrics.itemChanged.connect(lambda _: self._draw())
        self.plot = QtThemedPlot()
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.plot.setLabel("bottom", "token")
        self.legend = self.plot.legend
        form = QFormLayout()
        form.addRow("Run", self.run)
        form.addRow("Pivot", self.pivot)
        form.addRow("Scale", self.method)
        side = QVBoxLayout()
        side.addLayout(form)
        side.addWidget(self.metrics, 1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(side)
        layout.addWidget(self.plot, 1)

    def set_runs(self, runs: list[LoadedRun]) -> None:
        self.runs = list(runs)
        self.run.blockSignals(True)
        self.run.clear()
        for run in self.runs:
            self.run.addItem(run.label)
        self.run.blockSignals(False)
        self._run_changed()

    def _run_changed(self) -> None:
        """The metric choices are what the chosen run measured (keeping the ticks)."""
        index = self.run.currentIndex()
        measured = measured_metrics([self.runs[index].metrics]) if index >= 0 else []
        checked = set(self.checked()) or set(DEFAULT_CHECKED)
        pivot = self.pivot.currentData() or DEFAULT_PIVOT
        self.pivot.blockSignals(True)
        self.metrics.blockSignals(True)
        self.pivot.clear()
        self.metrics.clear()
        for m in measured:
            self.pivot.addItem(m.label, m.key)
            item = QListWidgetItem(m.label)
            item.setData(Qt.ItemDataRole.UserRole, m.key)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if m.key in checked
                               else Qt.CheckState.Unchecked)
            self.metrics.addItem(item)
        self.pivot.setCurrentIndex(max(self.pivot.findData(pivot), 0))
        self.pivot.blockSignals(False)
        self.metrics.blockSignals(False)
        self._draw()

    def checked(self) -> list[str]:
        return [self.metrics.item(i).data(Qt.ItemDataRole.UserRole)
                for i in range(self.metrics.count())
                if self.metrics.item(i).checkState() == Qt.CheckState.Checked]

    def legend_texts(self) -> list[str]:
        return [label.text for _, label in self.legend.items]

    def _draw(self) -> None:
        self.plot.clear()
        self.correlations = []
        index, pivot = self.run.currentIndex(), self.pivot.currentData()
        if index < 0 or not pivot:
            return
        mf = self.runs[index].metrics
        self.correlations = correlate(mf, self.checked(), pivot, self.method.currentData())
        x = token_index(mf)
        for i, c in enumerate(self.correlations):
            width = 2.0 if c.metric.key == pivot else 1.1
            self.plot.plot(x, c.normalized, pen=pg.mkPen(colour(i), width=width),
                           name=c.legend, connect="finite")
        self.plot.set_title(f"{self.runs[index].label}: r against {self.pivot.currentText()}")
