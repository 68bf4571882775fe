"""Any per-token metric of two or more runs on shared axes (x = token index), gaps where a run
measured nothing."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from workbench.runs.entries import LoadedRun
from workbench.ui.runs.curves import BY_KEY, measured_metrics, series, token_index
from workbench.ui.runs.palette import LEGEND_BACK, LEGEND_TEXT, colour

DEFAULT_METRIC = "wall_ms"


class QtOverlayPlot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[LoadedRun] = []
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.metric = QComboBox()
        self.metric.currentIndexChanged.connect(lambda _: self._draw())
        self.plot = pg.PlotWidget(background="w")
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.plot.setLabel("bottom", "token")
        self.plot.setClipToView(True)
        self.plot.setDownsampling(auto=True, mode="peak")
        self.legend = self.plot.addLegend(offset=(5, 5), labelTextSize="8pt",
                                          labelTextColor=LEGEND_TEXT, brush=LEGEND_BACK)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Metric"))
        bar.addWidget(self.metric, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.plot, 1)

    @property
    def metric_key(self) -> str:
        return self.metric.currentData() or ""

    def set_runs(self, runs: list[LoadedRun]) -> None:
        """Show these runs; the chosen metric stays if any of them measured it."""
        keep = self.metric_key or DEFAULT_METRIC
        self.runs = list(runs)
        self.metric.blockSignals(True)
        self.metric.clear()
        for m in measured_metrics([r.metrics for r in self.runs]):
            self.metric.addItem(f"{m.label} ({m.unit})", m.key)
        index = self.metric.findData(keep)
        self.metric.setCurrentIndex(max(index, 0))
        self.metric.blockSignals(False)
        self._draw()

    def set_metric(self, key: str) -> None:
        index = self.metric.findData(key)
        if index < 0:
            raise KeyError(f"no run measured {key!r}")
        self.metric.setCurrentIndex(index)

    def _draw(self) -> None:
        self.plot.clear()  # removes the curves and their legend entries
        self.curves = {}
        key = self.metric_key
        if not key:
            return
        metric = BY_KEY[key]
        self.plot.setLabel("left", metric.label, units=None)
        self.plot.setTitle(f"{metric.label} ({metric.unit}) per token", size="9pt")
        for i, run in enumerate(self.runs):
            y = series(run.metrics, key)
            name = run.label if np.isfinite(y).any() else f"{run.label} (not measured)"
            curve = self.plot.plot(token_index(run.metrics), y, name=name, connect="finite",
                                   pen=pg.mkPen(colour(i), width=1.2))
            self.curves[run.label] = curve
