"""Any per-token metric of two or more runs on shared axes (x = token index), gaps where a run
measured nothing. A scored run adds its per-position KL lane (quality_lane.py); Shift+drag on
the plot (or Worst stretch) brushes a stretch of positions, and the line under the plot says
what it cost in each run and which text it covers."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from workbench.runs.entries import LoadedRun
from workbench.ui.runs.curves import BY_KEY, measured_metrics
from workbench.ui.runs.palette import colour
from workbench.ui.runs.qt_themed_plot import QtThemedPlot
from workbench.ui.runs.quality_lane import (
    QUALITY_METRICS,
    Stretch,
    run_series,
    scored_metrics,
    stretch,
    worst_stretch,
)
from workbench.ui.telemetry.qt_span_view_box import QtSpanViewBox

_METRICS = {**BY_KEY, **{m.key: m for m in QUALITY_METRICS}}

DEFAULT_METRIC = "wall_ms"


class QtOverlayPlot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[LoadedRun] = []
        self.curves: dict[str, pg.PlotDataItem] = {}
        # Not `metric`: that name is QWidget.metric(), which Qt calls to paint the widget.
        self.metric_box = QComboBox()
        self.metric_box.currentIndexChanged.connect(lambda _: self._draw())
        self.view_box = QtSpanViewBox()
        self.view_box.span_dragged.connect(lambda lo, hi, _done: self.select_span(lo, hi))
        self.view_box.clicked.connect(self.clear_span)
        self.plot = QtThemedPlot(view_box=self.view_box)
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.plot.setLabel("bottom", "token")
        self.plot.setClipToView(True)
        self.plot.setDownsampling(auto=True, mode="peak")
        self.legend = self.plot.legend
        self.region: pg.LinearRegionItem | None = None
        self.stretches: list[Stretch] = []
        self.worst_button = QPushButton("Worst stretch")
        self.worst_button.setToolTip("Brush the stretch of positions with the highest mean KL "
                                     "in a scored run (Shift+drag brushes any stretch)")
        self.worst_button.clicked.connect(self.select_worst)
        self.readout = QLabel()
        self.readout.setWordWrap(True)
        self.readout.setVisible(False)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Metric"))
        bar.addWidget(self.metric_box, 1)
        bar.addWidget(self.worst_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.readout)

    @property
    def metric_key(self) -> str:
        return self.metric_box.currentData() or ""

    def set_runs(self, runs: list[LoadedRun]) -> None:
        """Show these runs; the chosen metric stays if any of them measured it."""
        keep = self.metric_key or DEFAULT_METRIC
        self.runs = list(runs)
        self.metric_box.blockSignals(True)
        self.metric_box.clear()
        for m in [*measured_metrics([r.metrics for r in self.runs]), *scored_metrics(self.runs)]:
            self.metric_box.addItem(f"{m.label} ({m.unit})", m.key)
        self.worst_button.setEnabled(bool(scored_metrics(self.runs)))
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
        self.region = None
        self.clear_span()
        key = self.metric_key
        if not key:
            return
        metric = _METRICS[key]
        self.plot.setLabel("left", metric.label, units=None)
        self.plot.set_title(f"{metric.label} ({metric.unit}) per token")
        for i, run in enumerate(self.runs):
            y = run_series(run, key)
            name = run.label if np.isfinite(y).any() else f"{run.label} (not measured)"
            curve = self.plot.plot(np.arange(y.size, dtype=float), y, name=name, connect="finite",
                                   pen=pg.mkPen(colour(i), width=1.2))
            self.curves[run.label] = curve

    # ---- brushing a stretch ------------------------------------------------------------------

    def select_span(self, lo: float, hi: float) -> list[Stretch]:
        """Brush positions lo..hi: mark them and say, per run, what they cost and their text."""
        first, last = math.ceil(lo), math.floor(hi)
        found = [s for run in self.runs if (s := stretch(run, first, last)) is not None]
        if not found:
            return []
        if self.region is None:
            self.region = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(255, 193, 7, 60),
                                              pen=pg.mkPen(255, 160, 0, 160))
            self.region.setZValue(-10)
            self.plot.addItem(self.region)
        self.region.setRegion((first - 0.5, last + 0.5))
        self.stretches = found
        self.readout.setText("\n".join(s.line() for s in found))
        self.readout.setVisible(True)
        return found

    def select_worst(self) -> list[Stretch]:
        """Brush the worst stretch of the first scored run (by mean KL)."""
        for run in self.runs:
            span = worst_stretch(run_series(run, "kl"))
            if span is not None:
                if self.metric_key != "kl":
                    self.set_metric("kl")
                return self.select_span(*span)
        return []

    def clear_span(self) -> None:
        if self.region is not None:
            self.plot.removeItem(self.region)
            self.region = None
        self.stretches = []
        self.readout.setVisible(False)
