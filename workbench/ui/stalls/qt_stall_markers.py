"""Markers at the slow tokens on every plot: a small triangle over each plot's first curve."""

from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg

from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel

MARKER = "#e65100"


class StallMarkers:
    """Per answer (message id), the x of its slow tokens, drawn on every plot."""

    def __init__(self, panel: QtTelemetryPanel) -> None:
        self.panel = panel
        self._items: dict[int, list[tuple[pg.PlotItem, Any]]] = {}
        self.xs: dict[int, list[int]] = {}

    def show(self, key: int, xs: list[int]) -> None:
        self.remove(key)
        self.xs[key] = list(xs)
        items = []
        for plot in self.panel.plots.values():
            columns = [col for item, col in self.panel.curves if item in plot.items]
            points = []
            for x in xs:
                row = self.panel.row_at(x)
                if row is None:
                    continue
                values = [row[col] for col in columns if not math.isnan(row[col])]
                if values:  # on top of the highest curve at that token
                    points.append((x, max(values)))
            if not points:
                continue
            scatter = pg.ScatterPlotItem([p[0] for p in points], [p[1] for p in points],
                                         symbol="t", size=9, pen=pg.mkPen(MARKER),
                                         brush=pg.mkBrush(MARKER))
            scatter.setZValue(20)
            plot.addItem(scatter)
            items.append((plot, scatter))
        self._items[key] = items

    def remove(self, key: int) -> None:
        for plot, item in self._items.pop(key, []):
            plot.removeItem(item)
        self.xs.pop(key, None)

    def clear(self) -> None:
        for key in list(self._items):
            self.remove(key)
