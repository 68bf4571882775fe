"""Hit rate against cache size, drawn with pyqtgraph: the window's cache-sizing view and
`workbench replay --plot` share this drawing, so a PNG looks like the view.

The shaded band is the cliff: below one generated token's experts a global LRU evicts each
layer's experts before the next token returns to them, so its hit rate falls to about zero.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from pyqtgraph.exporters import ImageExporter
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt

from workbench.atomic_write import check_output_path, write_bytes_atomic
from workbench.moe.cache_sizing import SizingCurves

LRU_COLOUR = "#1565c0"
BELADY_COLOUR = "#2e7d32"
BUDGET_COLOUR = "#ef6c00"
POLICY_COLOURS = {"lfru": "#6a1b9a", "layer": "#00838f"}
POLICY_LABELS = {"lfru": "LFRU (frequency + recency)", "layer": "layer-aware"}


class SizingItems:
    """The plot items of one cache-sizing plot, updated in place by `draw`."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.plot = plot
        plot.setLabel("bottom", "expert cache (MiB)")
        plot.setLabel("left", "hit rate while generating (%)")
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.setYRange(0, 100, padding=0.02)
        plot.addLegend(offset=(-10, 10))
        self.cliff = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(229, 57, 53, 40),
                                         pen=pg.mkPen(None))
        self.cliff.setZValue(-10)
        self.cliff.hide()
        plot.addItem(self.cliff)
        self.cliff_text = pg.TextItem("cliff: under one token's experts", color="#c62828",
                                      anchor=(0, 1))
        self.cliff_text.hide()
        plot.addItem(self.cliff_text)
        self.lru = plot.plot([], [], pen=pg.mkPen(LRU_COLOUR, width=2), symbol="o",
                             symbolSize=5, symbolBrush=LRU_COLOUR, name="LRU (the default)")
        self.belady = plot.plot([], [], pen=pg.mkPen(BELADY_COLOUR, width=2,
                                                      style=Qt.PenStyle.DashLine),
                                name="Belady (optimal)")
        self.policies: dict[str, pg.PlotDataItem] = {}  # made on first draw, one per policy
        self.budget = pg.InfiniteLine(angle=90, pen=pg.mkPen(BUDGET_COLOUR, width=2),
                                      label="budget", labelOpts={"position": 0.92,
                                                                 "color": BUDGET_COLOUR})
        self.budget.hide()
        plot.addItem(self.budget)

    def draw(self, curves: SizingCurves) -> None:
        self.lru.setData(curves.budget_mib, np.nan_to_num(curves.lru_hit_pct, nan=-1.0))
        self.belady.setData(curves.budget_mib, np.nan_to_num(curves.belady_hit_pct, nan=-1.0))
        for name, hits in curves.policy_hit_pct.items():
            item = self.policies.get(name)
            if item is None:
                colour = POLICY_COLOURS.get(name, "#616161")
                item = self.policies[name] = self.plot.plot(
                    [], [], pen=pg.mkPen(colour, width=2), symbol="t", symbolSize=5,
                    symbolBrush=colour, name=POLICY_LABELS.get(name, name))
            item.setData(curves.budget_mib, np.nan_to_num(hits, nan=-1.0))
        for name, item in self.policies.items():
            if name not in curves.policy_hit_pct:
                item.setData([], [])
        if curves.cliff_mib > 0:
            self.cliff.setRegion((0.0, curves.cliff_mib))
            self.cliff.show()
            self.cliff_text.setPos(0.0, 2.0)
            self.cliff_text.show()
        else:
            self.cliff.hide()
            self.cliff_text.hide()
        if curves.current_mib > 0:
            self.budget.setValue(curves.current_mib)
            text = f"budget {curves.current_mib:.0f} MiB"
            self.budget.label.format = text  # what it re-renders to when shown
            self.budget.label.setText(text)  # and now (a hidden label skips re-rendering)
            self.budget.show()
        else:
            self.budget.hide()
        self.plot.setXRange(0, max(curves.total_mib, curves.current_mib, 1.0), padding=0.02)


def write_curves_png(curves: SizingCurves, path: str | os.PathLike[str], title: str,
                     size: tuple[int, int] = (900, 560)) -> Path:
    """Render the curves offscreen to a PNG, whole or not at all (OutputFileError says why)."""
    target = check_output_path(path)
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # a command: no window shown
        app = QApplication([])
    widget = pg.GraphicsLayoutWidget()
    widget.setBackground("w")
    widget.resize(*size)
    plot = widget.addPlot(title=title)
    SizingItems(plot).draw(curves)
    widget.show()  # the layout takes its size only once shown (offscreen for the command)
    app.processEvents()
    exporter = ImageExporter(widget.scene())
    exporter.parameters()["width"] = size[0]
    image = exporter.export(toBytes=True)
    widget.close()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise OSError(f"{target} was not written: the plot could not be encoded as PNG")
    return write_bytes_atomic(target, bytes(data.data()))
