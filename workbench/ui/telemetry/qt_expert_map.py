"""The expert activity map: layers x experts, recent routing as colour, cache residency as dots.

Token events only fold their routings into the model (`ExpertActivityMap.add`, a few numpy
operations) and mark it changed. A 5 Hz timer repaints, as the shared pacer allows, and only
when something changed and the widget is on screen: on a 2-core machine every frame is CPU the
engine does not get. A model that does not stream its experts has no routing to show; the widget
says so in grey text.
"""

from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtWidgets import QLabel, QStackedLayout, QVBoxLayout, QWidget

from workbench.engine.requests import ExpertActivity
from workbench.ui.qt_flow_layout import QtFlowLayout
from workbench.ui.qt_text_style import SMALL_PX, dim_text
from workbench.ui.qt_theme import PlotColours, plot_colours
from workbench.ui.telemetry.expert_activity import (
    AHEAD_RGB,
    LUT,
    RESIDENT_RGB,
    SUBSTITUTED_RGB,
    TRANSIENT_RGB,
    ExpertActivityMap,
    tick_step,
)
from workbench.ui.telemetry.qt_scene_width import scene_min_width
from workbench.ui.ui_pacer import shared_pacer

REPAINT_MS = 200  # at most 5 frames a second: the map changes once per token at most
MAX_REPAINT_S = 1.0  # at least one while the engine needs every core (ui_pacer.py)
NEEDS_STREAMING = "needs expert streaming"


def _hex(rgb: tuple[int, ...]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb[:3])


class QtExpertMap(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = ExpertActivityMap()
        self.streaming = False
        self.paints = 0  # how many times the image was rebuilt (tests)
        self._painted_version = -1

        self.message = QLabel(NEEDS_STREAMING)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        dim_text(self.message)
        self.message.setWordWrap(True)

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground(plot_colours().background)
        self.plot = self.graphics.addPlot()
        half_life = f"{self.model.half_life:g}"
        self.plot.setTitle(f"Routing over recent tokens (decayed, half-life {half_life} tokens)",
                           size="9pt")
        self.plot.setLabel("left", "layer")
        self.plot.setLabel("bottom", "expert")
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.getViewBox().invertY(True)  # layer 0 on top, as in the model
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.graphics.setMinimumWidth(scene_min_width(self.graphics))  # the title, whole

        self.readout = QLabel("Hover a cell to read its layer and expert")
        dim_text(self.readout, pixel_size=SMALL_PX)
        self.readout.setWordWrap(True)
        self.scale_label = QLabel()
        dim_text(self.scale_label, pixel_size=SMALL_PX)
        self.scale_label.setWordWrap(True)
        bar = QLabel()
        bar.setFixedSize(90, 10)
        stops = ", ".join(f"stop:{i / 4:g} {_hex(tuple(LUT[min(255, i * 64)]))}"
                          for i in range(5))
        bar.setStyleSheet("border: 1px solid #bbb; background: qlineargradient(x1:0, y1:0, "
                          f"x2:1, y2:0, {stops});")
        self.residency_label = QLabel()
        dim_text(self.residency_label, pixel_size=SMALL_PX)
        self.residency_label.setWordWrap(True)
        # A flow: in one row the legend asked for 561 px, more than a dock beside the chat has.
        legend = QtFlowLayout(h_spacing=8)
        self.scale_zero = QLabel("0")
        dim_text(self.scale_zero, pixel_size=SMALL_PX)
        legend.addWidget(self.scale_zero)
        legend.addWidget(bar)
        legend.addWidget(self.scale_label)
        legend.addWidget(self.residency_label)

        plot_page = QWidget()
        column = QVBoxLayout(plot_page)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.graphics, 1)
        column.addLayout(legend)
        column.addWidget(self.readout)
        self.pages = QStackedLayout(self)
        self.pages.addWidget(self.message)
        self.pages.addWidget(plot_page)
        self._show_legend()

        self._timer = QTimer(self)
        self._timer.setInterval(REPAINT_MS)
        self._timer.timeout.connect(self._tick)  # runs only while the model streams
        self._hover_proxy = pg.SignalProxy(
            self.graphics.scene().sigMouseMoved, rateLimit=10, slot=self._hover)

    def set_colours(self, colours: PlotColours) -> None:
        """Follow the theme: the map's backdrop and axes (its cells keep their own scale)."""
        self.graphics.setBackground(colours.background)
        for side in ("left", "bottom"):
            axis = self.plot.getAxis(side)
            axis.setPen(colours.foreground)
            axis.setTextPen(colours.foreground)
        self.plot.titleLabel.setText(self.plot.titleLabel.text, size="9pt",
                                     color=colours.foreground)

    # ---- data in ------------------------------------------------------------------------------

    def set_model(self, model: Any) -> None:
        """A model was loaded (a `LoadedModel`) or unloaded (None): start an empty map."""
        self.model.reset()
        self._painted_version = -1
        self.image.clear()
        self.streaming = model is not None and bool(model.is_moe and model.config.moe_stream)
        if self.streaming:
            self._timer.start()
        else:
            self._timer.stop()  # a dense model never routes: no wake-ups for nothing
        if model is None:
            self._say("no model loaded")
        elif not self.streaming:
            self._say(NEEDS_STREAMING)
        else:
            self._say("expert streaming is on: the map fills as tokens are generated")

    def add(self, activity: ExpertActivity | None) -> None:
        """One token's routing (None when the session does not stream). Cheap: no painting."""
        if activity is None:
            return
        self.model.add(activity)
        self.streaming = True
        if not self._timer.isActive():
            self._timer.start()
        if self.pages.currentIndex() != 1:
            self.pages.setCurrentIndex(1)

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.pages.setCurrentIndex(0)

    # ---- painting -----------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return self.model.version != self._painted_version

    @property
    def on_screen(self) -> bool:
        # A dock behind another tab is still isVisible() to Qt; only its region is empty.
        view = self.graphics.viewport()  # the view itself is all covered by it
        return view.isVisible() and not view.visibleRegion().isEmpty()

    def _tick(self) -> None:
        # Hidden behind a tab or closed: costs nothing. On screen: as often as the pacer allows.
        if self.dirty and self.on_screen and shared_pacer().due("experts", REPAINT_MS / 1000,
                                                                MAX_REPAINT_S):
            self.repaint_map()

    def repaint_map(self) -> None:
        """Rebuild the image from the model now (the timer's job; tests call it directly)."""
        self._painted_version = self.model.version
        n_layer, n_expert = self.model.shape
        if self.model.empty or not n_layer or not n_expert:
            self.image.clear()
        else:
            self.image.setImage(self.model.rgba(), autoLevels=False)
            # Cell (layer, expert) is centred on those integers, so the axes' ticks name rows
            # and columns; ticks are whole numbers, about eight per axis.
            self.image.setRect(QRectF(-0.5, -0.5, n_expert, n_layer))
            self.plot.setRange(xRange=(-0.5, n_expert - 0.5), yRange=(-0.5, n_layer - 0.5),
                               padding=0)
            for side, n in (("left", n_layer), ("bottom", n_expert)):
                step = tick_step(n)
                self.plot.getAxis(side).setTickSpacing(levels=[(step, 0)])
        self._show_legend()
        self.paints += 1

    def _show_legend(self) -> None:
        model = self.model
        self.scale_label.setText(f"{model.hottest():.1f} routings (hottest cell; "
                                 f"{model.steady_max:.1f} = every token)")
        if model.empty or model.cached:
            dot = f'<span style="color:{_hex(RESIDENT_RGB)}">●</span>'
            policy = f" ({model.policy} policy)" if model.policy else ""
            held = ""
            if model.holds is not None and (model.holds >= 2).any():
                held = (f', <span style="color:{_hex(TRANSIENT_RGB)}">●</span> transient, '
                        f'<span style="color:{_hex(AHEAD_RGB)}">●</span> read ahead')
            if model.any_substituted:
                held += (f', <span style="color:{_hex(SUBSTITUTED_RGB)}">▪</span> (corner) '
                         "brought in by substitution")
            self.residency_label.setText(f"{dot} = expert resident in the cache{policy}{held}")
        else:
            self.residency_label.setText("the expert cache is off: no expert stays resident")

    # ---- interaction --------------------------------------------------------------------------

    def cell_at(self, x: float, y: float) -> tuple[int, int]:
        """(layer, expert) under view coordinates (x = expert, y = layer)."""
        return math.floor(y + 0.5), math.floor(x + 0.5)

    def _hover(self, event: tuple[Any, ...]) -> None:
        pos = event[0]
        box = self.plot.getViewBox()
        if not box.sceneBoundingRect().contains(pos):
            return
        point = box.mapSceneToView(pos)
        text = self.model.describe(*self.cell_at(point.x(), point.y()))
        if text:
            self.readout.setText(text)

