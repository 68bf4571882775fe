"""Any per-token metric of two or more runs on shared axes (x = token index), gaps where a run
measured nothing."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from workbench.ui.runs.curves import BY_KEY, measured_metrics, series, token_index
from workbench.ui.runs.entries import LoadedRun
from workbench.ui.runs.palette import colour
from workbench.ui.runs.qt_themed_plot import QtThemedPlot

DEFAULT_METRIC = "wall_ms"


class QtOverlayPlot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[LoadedRun] = []
        self.curves: dict[str, pg.PlotDataItem] = {}
        # Not `metric`: that name is QWidget.metric(), which Qt calls to paint the widget.
        self.metric_box = QComboBox()
        self.metric_box.currentIndexChanged.connect(lambda _: self._draw())
        self.plot = QtThemedPlot()
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.plot.setLabel("bottom", "token")
        self.plot.setClipToView(True)
        self.plot.setDownsampling(auto=True, mode="peak")
        self.legend = self.plot.legend
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Metric"))
        bar.addWidget(self.metric_box, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.plot, 1)

    @property
    def metric_key(self) -> str:
        return self.metric_box.currentData() or ""

    def set_runs(self, runs: list[LoadedRun]) -> None:
        """Show these runs; the chosen metric stays if any of them measured it."""
        keep = self.metric_key or DEFAULT_METRIC
        self.runs = list(runs)
        self.metric_box.blockSignals(True)
        self.metric_box.clear()
        for m in measured_metrics([r.metrics for r in self.runs]):
            self.metric_box.addItem(f"{m.label} ({m.unit})", m.key)
        index = self.metric_box.findData(keep)
        self.metric_box.setCurrentIndex(max(index, 0))
        self.metric_box.blockSignals(False)
        self._draw()

    def set_metric(self, key: str) -> None:
        index = self.metric_box.findData(key)
        if index < 0:
            raise KeyError(f"no run measured {key!r}")
        self.metric_box.setCurrentIndex(index)

    def _draw(self) -> None:
        self.plot.clear()  # removes the curves and their legend entries
        self.curves = {}
        key = self.metric_key
        if not key:
            return
        metric = BY_KEY[key]
        self.plot.setLabel("left", metric.label, units=None)
        self.plot.set_title(f"{metric.label} ({metric.unit}) per token")
        for i, run in enumerate(self.runs):
            y = series(run.metrics, key)
            name = run.label if np.isfinite(y).any() else f"{run.label} (not measured)"
            curve = self.plot.plot(token_index(run.metrics), y, name=name, connect="finite",
                                   pen=pg.mkPen(colour(i), width=1.2))
            self.curves[run.label] = curve
