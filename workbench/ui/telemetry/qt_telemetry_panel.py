"""The live plots: one ring buffer, eight linked plots, a repaint timer, hover and highlight.

Tokens only append rows to the ring buffer and set a dirty flag. The repaint timer (<= 30 Hz)
hands the plots views of the buffer; the headline row has its own 2 Hz timer. Nothing here
takes a timestamp: x is the token index, and every time comes from the engine's metrics.
Panning or zooming a plot stops following the newest tokens; "Follow" resumes. Shift+drag
selects a span of tokens: it is marked on every plot, its cost is summed above them, and the
chat highlights its tokens; a click clears it.

Axes show only numbers they can fit: a plot with nothing to show yet hides its tick labels
(no made-up 0-1 scale), memory reaching a GiB is labelled in GiB, and an axis whose labels
would not fit its width widens (pyqtgraph silently drops a label that does not fit).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFontMetrics
from PySide6.QtWidgets import (
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.token_choice import TokenChoice
from workbench.ui.qt_plain_label import plain_label
from workbench.ui.qt_text_style import SMALL_PX, dim_text
from workbench.ui.qt_theme import LIGHT_INK, PlotColours, plot_colours
from workbench.ui.telemetry.headline import HeadlineTracker
from workbench.ui.telemetry.qt_headline_row import QtHeadlineRow
from workbench.ui.telemetry.qt_scene_width import scene_min_width
from workbench.ui.telemetry.qt_span_view_box import QtSpanViewBox
from workbench.ui.telemetry.ring_buffer import RingBuffer
from workbench.ui.telemetry.series import (
    COLUMNS,
    PLOTS,
    PlotSpec,
    axis_unit,
    curve_name,
    metrics_getter,
    plot_title,
    readout,
    row_values,
)
from workbench.ui.telemetry.span import SpanSummary, span_text, summarize_span
from workbench.ui.telemetry.view_range import YScale, follow_x_range, y_scale
from workbench.ui.ui_pacer import LIVE_FRAME_MAX_S, UiPacer, pace_note, shared_pacer

# The timer ticks at ~30 Hz, the most the plots ever repaint; the shared pacer (ui_pacer.py)
# stretches that to as little as once every MAX_REPAINT_S while the engine needs every core,
# since each frame's CPU comes off the token rate then (issue 39: at once every 4 s, as
# before, the plots looked stuck). A frame's interval counts from its start, not its end.
TICK_MS = 33
MAX_REPAINT_S = LIVE_FRAME_MAX_S
PLOTS_PER_TICK = 2
HEADLINE_MS = 500  # numbers people read: twice a second is plenty...
MAX_HEADLINE_S = 2.0  # ...and every two seconds will do while the engine needs every core
CAPACITY = 32768  # tokens kept for the plots (a conversation's worth; 2 x 32k x 20 doubles)
MAX_TURN_MARKERS = 200
AXIS_WIDTH = 42  # px for the left axis: four digits; wider only when its labels need it
AXIS_SLACK = 16  # px the plots' minimum width leaves for axes wider than that
NO_DATA = "no data yet"
CLIPPED_COLOUR = "#e65100"  # the slow-token markers' orange: "look here"


class QtTelemetryPanel(QWidget):
    follow_changed = Signal(bool)
    headline_updated = Signal(object)  # Headline, at most twice a second
    span_selected = Signal(int, int)  # first and last token x of a selected span; -1, -1: none
    cleared = Signal()  # clear() emptied the plots (items others drew on them go too)

    def __init__(self, parent: QWidget | None = None, capacity: int = CAPACITY,
                 pacer: UiPacer | None = None) -> None:
        super().__init__(parent)
        self.pacer = pacer or shared_pacer()
        self.colours = plot_colours()  # the theme's (qt_theme.py); set_colours() follows it
        pg.setConfigOptions(antialias=False, background=self.colours.background,
                            foreground=self.colours.foreground)
        self._ink_curves: list[pg.PlotCurveItem] = []  # drawn in the theme's ink, not a hue
        self.ring = RingBuffer(capacity, COLUMNS)
        self.headline = HeadlineTracker()
        self.next_x = 0
        self.turn = -1
        self.repaints = 0  # how many times the plots were given new data (tests, bench)
        self._dirty = False
        self.following = True
        # Turn (dashed) and run (dotted) boundary lines, with their style for a theme change.
        self._turn_lines: list[tuple[pg.PlotItem, pg.InfiniteLine, Qt.PenStyle]] = []
        self.run_starts: list[int] = []  # x of each continuation's first token
        self._highlight: list[Any] = []
        self.highlighted_x: int | None = None
        self._span_regions: list[tuple[pg.PlotItem, pg.LinearRegionItem]] = []
        self.span: SpanSummary | None = None
        # The token view's choices (ui/chat/token_view.py), by x: only tokens generated with it
        # on have one; the oldest go with the ring buffer's rows.
        self.choices: dict[int, TokenChoice] = {}
        # Whether the session reads experts with O_DIRECT: only then are reads "flash" reads.
        self.o_direct = False

        self.headline_row = QtHeadlineRow()
        self.follow_button = QPushButton("Follow newest")
        self.follow_button.setEnabled(False)
        self.follow_button.clicked.connect(lambda: self.set_following(True))
        self.readout = QLabel("Hover a plot to read a token's values")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # it quotes the model's tokens
        dim_text(self.readout, pixel_size=SMALL_PX)
        self.readout.setWordWrap(True)
        self.span_readout = QLabel()
        self.span_readout.setWordWrap(True)
        self.span_readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.span_readout.setVisible(False)
        # The conversations whose model state is kept (the KV pool), refreshed after each turn.
        self.kv_states = plain_label()
        dim_text(self.kv_states, pixel_size=SMALL_PX)
        self.kv_states.setWordWrap(True)
        self.kv_states.setVisible(False)
        tools = QHBoxLayout()
        tools.addWidget(self.readout, 1)
        tools.addWidget(self.follow_button)
        self.graphics = pg.GraphicsLayoutWidget()
        # Says when the plots are paced down, so a slow refresh is not mistaken for a stall. It
        # lies over the plots' top right corner, in no layout: beside the readout it wrapped the
        # readout onto more lines as it came and went, and each time all nine plots were laid
        # out and every axis drawn again, twice an answer (issue 39: the event loop's worst
        # stalls mid-answer).
        self.pace_note = QLabel("", self.graphics)
        self.pace_note.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.pace_note.setVisible(False)
        self._style_pace_note()
        self.graphics.installEventFilter(self)
        self.plots: dict[str, pg.PlotItem] = {}
        self.curves: list[tuple[pg.PlotDataItem, int]] = []
        self._plot_columns: dict[str, list[int]] = {}
        self._specs: dict[str, PlotSpec] = {spec.key: spec for spec in PLOTS}
        self._empty_labels: dict[str, pg.TextItem] = {}
        # Per plot, the outliers above its (robust) y axis: "▲ 1 above: 3000 ms" in a corner.
        self._clip_labels: dict[str, pg.TextItem] = {}
        self.clipped: dict[str, int] = {}
        self._axis_units: dict[str, str] = {}  # the unit each left axis is labelled in
        self._plot_curves: dict[str, list[tuple[pg.PlotDataItem, int]]] = {}
        self._stale: set[str] = set()  # plots whose curves lag behind the ring buffer
        self._queued: list[list[str]] = []  # the rest of a frame, a group per tick
        self._syncing_x = False
        self._ranges: dict[str, tuple[float, float]] = {}  # what each axis was last set to
        self._build_plots()
        # Two plots side by side, titles in their longer wording (page cache); the slack is
        # for axes that widen later.
        self.graphics.setMinimumWidth(scene_min_width(self.graphics) + AXIS_SLACK)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.headline_row)
        layout.addLayout(tools)
        layout.addWidget(self.span_readout)
        layout.addWidget(self.kv_states)
        layout.addWidget(self.graphics, 1)

        # When each complete frame (every stale plot given its data) was drawn: `bench ui`
        # reads the live refresh interval from these (perf_counter seconds).
        self.frame_times: deque[float] = deque(maxlen=4096)
        self._repaint_timer = QTimer(self)
        self._repaint_timer.setInterval(TICK_MS)
        self._repaint_timer.timeout.connect(self._tick)
        self._repaint_timer.start()
        self._headline_timer = QTimer(self)
        self._headline_timer.setInterval(HEADLINE_MS)
        self._headline_timer.timeout.connect(self._headline_tick)
        self._headline_timer.start()
        self._hover_proxy = pg.SignalProxy(
            self.graphics.scene().sigMouseMoved, rateLimit=20, slot=self._hover)

    def _build_plots(self) -> None:
        for i, spec in enumerate(PLOTS):
            view_box = QtSpanViewBox()
            view_box.span_dragged.connect(self._span_dragged)
            view_box.clicked.connect(self.clear_span)
            plot = self.graphics.addPlot(row=i // 2, col=i % 2, viewBox=view_box)
            plot.setTitle(plot_title(spec, self.o_direct), size="9pt",
                          color=self.colours.foreground)
            # Horizontal grid lines only: the vertical ones are drawn by the x axis across the
            # whole plot, so each page of the x range re-rendered eight plot-sized pictures
            # (a third of the UI's CPU while an answer streamed). x is a token index; the
            # bottom row's ticks and the turn markers locate it.
            plot.showGrid(x=False, y=True, alpha=0.2)
            bottom_row = i >= len(PLOTS) - 2
            plot.setMenuEnabled(False)
            plot.getAxis("left").setWidth(AXIS_WIDTH)
            if not bottom_row:
                # x ticks only under the bottom row: each x axis is re-laid out whenever the
                # (linked) x range pages forward, and eight of them cost a visible hitch.
                plot.hideAxis("bottom")
            for side in ("left", "bottom"):
                # Cached as pixmaps: a frame that only moves curves blits the axes.
                plot.getAxis(side).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
            plot.disableAutoRange()  # ranges move in steps (view_range.py), not every frame
            plot.setYRange(0, 1, padding=0)
            if len(spec.curves) > 1:
                plot.addLegend(offset=(-4, 4), labelTextSize="7pt", verSpacing=-6,
                               brush=pg.mkBrush(*self.colours.legend),
                               labelTextColor=self.colours.foreground)
            empty = pg.TextItem(NO_DATA, color=self.colours.dim, anchor=(0.5, 0.5))
            empty.setParentItem(plot.getViewBox())
            self._empty_labels[spec.key] = empty
            clip = pg.TextItem("", color=CLIPPED_COLOUR, anchor=(0, 0))
            clip.setParentItem(plot.getViewBox())
            clip.setVisible(False)
            self._clip_labels[spec.key] = clip
            view_box.sigResized.connect(lambda _, key=spec.key: self._place_label(key))
            # No numbers until there is something to measure them by.
            plot.getAxis("left").setStyle(showValues=False)
            # Not linked: while following, each plot pages forward on its own tick (see _tick);
            # a pan or zoom by the user is copied to the others (_x_moved).
            view = plot.getViewBox()
            view.sigRangeChangedManually.connect(lambda *_, v=view: self._user_moved(v))
            plot.getViewBox().sigXRangeChanged.connect(self._x_moved)
            for curve in spec.curves:
                ink = curve.colour == LIGHT_INK
                pen = pg.mkPen(self.colours.ink if ink else curve.colour, width=1.2)
                # PlotCurveItem rather than PlotDataItem: the panel already hands it only the
                # visible tokens, and the lighter item halves the Python work per frame.
                item = pg.PlotCurveItem(name=curve_name(curve, self.o_direct))
                item.setPen(pen)
                if ink:
                    self._ink_curves.append(item)
                item.setData([], [], connect="finite")  # NaN (unmeasured) breaks the line: a gap
                if curve.fill:
                    colour = QColor(curve.colour)
                    colour.setAlpha(150)
                    item.setFillLevel(0.0)
                    item.setBrush(colour)
                plot.addItem(item)
                self.curves.append((item, self.ring.index[curve.column]))
                self._plot_curves.setdefault(spec.key, []).append(self.curves[-1])
            self._plot_columns[spec.key] = [self.ring.index[c.column] for c in spec.curves]
            self.plots[spec.key] = plot

    def _style_pace_note(self) -> None:
        r, g, b, a = self.colours.legend  # the legends' backdrop: the title under it gives way
        self.pace_note.setStyleSheet(f"color: #a66; font-size: 11px; padding: 1px 4px; "
                                     f"background: rgba({r}, {g}, {b}, {a});")

    def set_colours(self, colours: PlotColours) -> None:
        """Recolour the plots for a theme: background, axes, titles, legends, the ink curve
        and the turn markers (the hues of the other curves read on both)."""
        self.colours = colours
        self._style_pace_note()
        pg.setConfigOptions(background=colours.background, foreground=colours.foreground)
        self.graphics.setBackground(colours.background)
        for plot in self.plots.values():
            for side in ("left", "bottom"):
                axis = plot.getAxis(side)
                axis.setPen(colours.foreground)
                axis.setTextPen(colours.foreground)
            plot.titleLabel.setText(plot.titleLabel.text, size="9pt", color=colours.foreground)
            if plot.legend is not None:
                plot.legend.setBrush(pg.mkBrush(*colours.legend))
                plot.legend.setLabelTextColor(colours.foreground)  # for labels added later
                for _, label in plot.legend.items:  # those shown already keep their own
                    label.setText(label.text, color=colours.foreground)
        for empty in self._empty_labels.values():
            empty.setColor(colours.dim)
        for item in self._ink_curves:
            item.setPen(pg.mkPen(colours.ink, width=1.2))
        for _, line, style in self._turn_lines:
            line.setPen(pg.mkPen(colours.grid, style=style))
        self._dirty = True

    # ---- data in ------------------------------------------------------------------------------

    def begin_turn(self) -> int:
        """A new generation starts at the next x; marks the boundary on every plot."""
        self.turn += 1
        self.headline.begin_turn()
        if self.next_x > 0:
            self._mark(self.next_x, Qt.PenStyle.DashLine)
        return self.next_x

    def begin_run(self) -> int:
        """The answer being plotted goes on in a new run (Continue): its tokens keep its turn
        and follow on its x, and a dotted line (a turn's is dashed) marks where the run begins.
        """
        self.headline.begin_turn()  # a rate across the pause between the runs would be false
        self.run_starts.append(self.next_x)
        self._mark(self.next_x, Qt.PenStyle.DotLine)
        return self.next_x

    def _mark(self, x: int, style: Qt.PenStyle) -> None:
        for plot in self.plots.values():
            line = pg.InfiniteLine(x - 0.5, angle=90,
                                   pen=pg.mkPen(self.colours.grid, style=style))
            plot.addItem(line)
            self._turn_lines.append((plot, line, style))
        while len(self._turn_lines) > MAX_TURN_MARKERS * len(self.plots):
            plot, line, _ = self._turn_lines.pop(0)
            plot.removeItem(line)

    def append(self, metrics: Any, choice: TokenChoice | None = None) -> int:
        """One token's row (TokenMetrics or a stored dict), with what it was chosen from when
        the token view is on; returns its x. Cheap: no painting."""
        x = self.next_x
        self.ring.append(row_values(metrics_getter(metrics), x, self.turn))
        if choice is not None:
            self.choices[x] = choice
            if len(self.choices) > self.ring.capacity:
                del self.choices[next(iter(self.choices))]  # the oldest, gone from the ring
        self.next_x += 1
        self._dirty = True
        if not isinstance(metrics, dict):
            self.headline.on_token(metrics)
        return x

    def load_turns(self, turns: Iterable[Sequence[list[dict[str, Any]]]]) -> list[int]:
        """Replace everything with stored answers: per turn, the token rows of each of its runs
        (more than one after Continue, plotted as one series with the run boundaries marked);
        returns each turn's first x."""
        self.clear()
        starts = []
        for runs in turns:
            starts.append(self.begin_turn())
            for i, rows in enumerate(runs):
                if i and rows:
                    self.begin_run()
                for row in rows:
                    self.append(row)
        self.repaint()
        return starts

    def clear(self) -> None:
        self.ring.clear()
        self.choices.clear()
        self.next_x = 0
        self.turn = -1
        for plot, line, _ in self._turn_lines:
            plot.removeItem(line)
        self._turn_lines.clear()
        self.run_starts.clear()
        self._clear_highlight()
        self.clear_span()
        for item, _ in self.curves:
            item.setData([], [])
        for key in self.plots:
            self._say(key, NO_DATA)
        self.headline = HeadlineTracker()
        self._show_headline()  # a new chat shows none of the last one's figures...
        self.set_following(True)
        for key, plot in self.plots.items():  # ...nor its x axis, nor its y scale
            self._set_range(f"x:{key}", plot, *follow_x_range(0, 0))
            self._set_range(key, plot, 0.0, 1.0)
            self._flag_clipped(key, YScale(1.0, 0, math.nan))
        self.cleared.emit()

    # ---- painting -----------------------------------------------------------------------------

    def _tick(self) -> None:
        """Timer: when the pacer allows a frame, the plots get their newest data two at a
        time on consecutive ticks, so no single step of the event loop pays for all eight (a
        frame that pages the x range re-draws every plot: tens of ms on a busy machine)."""
        if self._dirty:
            self._stale = set(self.plots)
            self._dirty = False
        if not self._stale or self.graphics.viewport().visibleRegion().isEmpty():
            # Behind another dock's tab, hidden or closed, the plots cost nothing (a widget on
            # a background tab still counts as visible; its viewport's region is empty).
            return
        if not self._queued and self.pacer.due("plots", TICK_MS / 1000, MAX_REPAINT_S):
            keys = [key for key in self.plots if key in self._stale]
            self._queued = [keys[i:i + PLOTS_PER_TICK] for i in range(0, len(keys),
                                                                     PLOTS_PER_TICK)]
        if self._queued:
            self._paint([key for key in self._queued.pop(0) if key in self._stale])
            if not self._queued:
                self.frame_times.append(time.perf_counter())
        # Tick no faster than frames are allowed (an idle tick still costs a wake-up), and wake
        # when the next frame is due: its interval counts from this frame's start, so the
        # ticks this frame took are not added to the wait for the next.
        interval = TICK_MS if self._queued else max(
            TICK_MS, round(self.pacer.wait("plots", TICK_MS / 1000, MAX_REPAINT_S) * 1000))
        if interval != self._repaint_timer.interval():
            self._repaint_timer.setInterval(interval)

    def repaint(self) -> None:
        """Give every plot its newest data now (tests, screenshots, the end of a turn)."""
        if self._dirty:
            self._stale = set(self.plots)
            self._dirty = False
        if self._stale:
            self._paint(list(self._stale))

    def _paint(self, keys: list[str]) -> None:
        if not keys:
            return
        data = self.ring.view()
        x = data[:, 0]
        if self.following and len(x):
            lo, hi = follow_x_range(x[0], x[-1])
        else:
            lo, hi = self.plots[keys[0]].getViewBox().viewRange()[0]
        # Only what is visible: each frame then costs O(window), not O(history). A pan or zoom
        # marks the plots stale and re-slices; a margin for it, while not following, saves a
        # re-slice per step of a drag. While following, x only moves forward, in steps, so
        # the tokens behind the range are not drawn (they were a third of every frame's
        # points), nor counted by the y axis' scale (it counts what is visible).
        margin = 0.0 if self.following else (hi - lo) / 2
        first = max(0, int(np.searchsorted(x, lo - margin)) - 1)
        last = int(np.searchsorted(x, hi + margin)) + 1
        view = data[first:last]
        for key in keys:
            self._stale.discard(key)
            if self.following and len(x):
                self._set_range(f"x:{key}", self.plots[key], lo, hi)
            measured = any(np.isfinite(view[:, col]).any() for col in self._plot_columns[key])
            self._say(key, NO_DATA if not len(x) else self._specs[key].unmeasured
                      if len(view) and not measured else "")
            for item, col in self._plot_curves[key]:
                y = view[:, col]
                if not np.isfinite(y).any():
                    # Unmeasured (e.g. streaming fields without streaming): a gap, and no
                    # need to hand pyqtgraph hundreds of NaNs every frame.
                    if item.xData is not None and len(item.xData):
                        item.setData([], [])
                    continue
                item.setData(view[:, 0], y)
            if self.following and len(x):
                scale = y_scale([view[:, col] for col in self._plot_columns[key]],
                                cap=self._specs[key].y_max)
                self._set_range(key, self.plots[key], 0.0, scale.top)
                self._flag_clipped(key, scale)
        self.repaints += 1

    def _set_range(self, key: str, plot: pg.PlotItem, lo: float, hi: float) -> None:
        if self._ranges.get(key) == (lo, hi):
            return  # an unchanged axis is not re-laid out or re-drawn
        self._ranges[key] = (lo, hi)
        if key.startswith("x:"):
            plot.setXRange(lo, hi, padding=0)
        else:
            plot.setYRange(lo, hi, padding=0)
            self._fit_axis(key, hi)

    def _say(self, key: str, text: str) -> None:
        """Over an empty plot, why it is empty ("" for a plot with data); its axis shows
        numbers only when there is data to read them by."""
        label = self._empty_labels[key]
        if text:
            label.setText(text)  # a no-op when unchanged
        label.setVisible(bool(text))
        axis = self.plots[key].getAxis("left")
        if axis.style["showValues"] == bool(text):
            axis.setStyle(showValues=not text)
        # A legend of curves with no data says nothing, and lies over the reason (issue 39).
        legend = self.plots[key].legend
        if legend is not None and legend.isVisible() == bool(text):
            legend.setVisible(not text)
        self._place_label(key)

    def _place_label(self, key: str) -> None:
        label = self._empty_labels[key]
        if label.isVisible():
            label.setPos(self.plots[key].getViewBox().boundingRect().center())
        clip = self._clip_labels[key]
        if clip.isVisible():
            clip.setPos(self.plots[key].getViewBox().boundingRect().topLeft())

    def _flag_clipped(self, key: str, scale: YScale) -> None:
        """Say how many values lie above the axis, and the highest (hover reads each)."""
        self.clipped[key] = scale.clipped
        clip = self._clip_labels[key]
        text = ""
        if scale.clipped:
            text = f"▲ {scale.clipped} above the axis, max {scale.peak:.4g} {self._specs[key].unit}"
        if text != clip.toPlainText():
            clip.setText(text)
        if clip.isVisible() != bool(text):
            clip.setVisible(bool(text))
        self._place_label(key)

    def _fit_axis(self, key: str, top: float) -> None:
        """Label the left axis in a unit its numbers fit (MiB becomes GiB) and make it wide
        enough for them. Runs only when the range changes, which it does in steps."""
        spec = self._specs[key]
        plot = self.plots[key]
        axis = plot.getAxis("left")
        unit, scale = axis_unit(spec.unit, top)
        if scale != axis.scale:
            axis.setScale(scale)
        if self._axis_units.get(key, spec.unit) != unit:
            self._axis_units[key] = unit
            plot.setTitle(plot_title(spec, self.o_direct, unit), size="9pt",
                          color=self.colours.foreground)
        width = max(AXIS_WIDTH, tick_label_width(axis, 0.0, top))
        if width != axis.fixedWidth:
            axis.setWidth(width)

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        self._dirty = True  # catch up on what arrived while hidden

    def _headline_tick(self) -> None:
        due = self.pacer.due("headline", HEADLINE_MS / 1000, MAX_HEADLINE_S)
        if due:
            self._show_headline()
        # The note is about the engine: it goes as soon as the answer ends (between answers the
        # stretch relaxes on its own), and otherwise changes with the headline.
        if due or not self.pacer.answering:
            interval = self.pacer.interval(TICK_MS / 1000, MAX_REPAINT_S)
            note = pace_note(interval) if self.pacer.answering else ""
            if note != self.pace_note.text():
                self.pace_note.setText(note)
                self.pace_note.setVisible(bool(note))
                self._place_pace_note()

    def _show_headline(self) -> None:
        self.headline_row.show_headline(self.headline.value)
        self.headline_updated.emit(self.headline.value)

    def _place_pace_note(self) -> None:
        note = self.pace_note
        if not note.isHidden():  # shown, or to be when the dock is (a background tab)
            note.adjustSize()
            note.move(max(0, self.graphics.width() - note.width() - 2), 2)

    def eventFilter(self, watched: Any, event: Any) -> bool:
        if watched is self.graphics and event.type() == QEvent.Type.Resize:
            self._place_pace_note()
        return super().eventFilter(watched, event)

    def show_kv_states(self, text: str) -> None:
        self.kv_states.setText(text)
        self.kv_states.setVisible(bool(text))

    def show_summary(self, summary: Any) -> None:
        self.headline.on_summary(summary)
        self._show_headline()

    def set_o_direct(self, o_direct: bool) -> None:
        """The open session's reads: O_DIRECT ones are from flash, buffered ones may come from
        the page cache (titles and legends say which)."""
        if o_direct == self.o_direct:
            return
        self.o_direct = o_direct
        for spec in PLOTS:
            plot = self.plots[spec.key]
            plot.setTitle(plot_title(spec, o_direct, self._axis_units.get(spec.key)),
                          size="9pt", color=self.colours.foreground)
            if plot.legend is None:
                continue
            names = {id(item): curve_name(curve, o_direct)
                     for (item, _), curve in zip(self._plot_curves[spec.key], spec.curves,
                                                 strict=True)}
            for sample, label in plot.legend.items:
                if id(sample.item) in names:
                    label.setText(names[id(sample.item)])

    # ---- interaction --------------------------------------------------------------------------

    def set_following(self, follow: bool) -> None:
        changed = follow != self.following
        self.following = follow
        self.follow_button.setEnabled(not follow)
        if follow:
            self._dirty = True
            self._ranges.clear()
        if changed:
            self.follow_changed.emit(follow)

    def _user_moved(self, view: Any) -> None:
        self.set_following(False)
        self._dirty = True
        self.set_x_range(*view.viewRange()[0])

    def _x_moved(self, view: Any, *_: Any) -> None:
        if self.following or self._syncing_x:
            return
        self._dirty = True  # the visible slice changed
        lo, hi = view.viewRange()[0]
        self.set_x_range(lo, hi)

    def set_x_range(self, lo: float, hi: float) -> None:
        """Show tokens lo..hi on every plot (a pan, a zoom, a highlighted token)."""
        self._syncing_x = True
        try:
            for plot in self.plots.values():
                if plot.getViewBox().viewRange()[0] != [lo, hi]:
                    plot.setXRange(lo, hi, padding=0)
        finally:
            self._syncing_x = False

    def row_at(self, x: int) -> np.ndarray | None:
        data = self.ring.view()
        if not len(data):
            return None
        i = int(x - data[0, 0])
        return data[i] if 0 <= i < len(data) else None

    def _hover(self, event: tuple[Any, ...]) -> None:
        pos = event[0]
        for plot in self.plots.values():
            if plot.sceneBoundingRect().contains(pos):
                x = plot.getViewBox().mapSceneToView(pos).x()
                self.show_token(round(x))
                return

    def show_token(self, x: int) -> None:
        """Read token x's values (and its alternatives, when recorded) in the readout line: a
        plot or a token in the chat's token view hovered."""
        row = self.row_at(x)
        if row is not None:
            self.readout.setText(readout(row, self.ring.index, self.choices.get(x)))

    def highlight(self, x: int) -> None:
        """Mark token x on every plot (a clicked token in the chat), bringing it into view."""
        self._clear_highlight()
        row = self.row_at(x)
        if row is None:
            return
        self.highlighted_x = x
        pen = pg.mkPen("#d50000", width=1.5)
        for plot in self.plots.values():
            line = pg.InfiniteLine(x, angle=90, pen=pen)
            plot.addItem(line)
            self._highlight.append((plot, line))
        for item, col in self.curves:
            value = row[col]
            if math.isnan(value):
                continue
            plot = next(p for p in self.plots.values() if item in p.items)
            dot = pg.ScatterPlotItem([x], [value], size=9, brush=pg.mkBrush("#d50000"))
            plot.addItem(dot)
            self._highlight.append((plot, dot))
        self.readout.setText(readout(row, self.ring.index, self.choices.get(x)))
        self.set_following(False)
        view = self.plots["wall"].getViewBox().viewRange()[0]
        if not view[0] <= x <= view[1]:
            half = max(8.0, (view[1] - view[0]) / 2)
            self.set_x_range(x - half, x + half)

    # ---- spans --------------------------------------------------------------------------------

    def _span_dragged(self, lo: float, hi: float, finished: bool) -> None:
        self.select_span(lo, hi, announce=finished)

    def select_span(self, lo: float, hi: float, announce: bool = True) -> None:
        """Mark tokens lo..hi on every plot and say what they cost; with `announce`, tell the
        chat (which highlights the tokens). Shift+drag on a plot calls this."""
        data = self.ring.view()
        span = summarize_span(data, self.ring.index, math.ceil(lo), math.floor(hi))
        if span is None:
            return
        self.span = span
        self.set_following(False)
        if not self._span_regions:
            brush = pg.mkBrush(255, 193, 7, 60)
            for plot in self.plots.values():
                region = pg.LinearRegionItem(movable=False, brush=brush,
                                             pen=pg.mkPen(255, 160, 0, 160))
                region.setZValue(-10)
                plot.addItem(region)
                self._span_regions.append((plot, region))
        for _, region in self._span_regions:
            region.setRegion((span.first_x - 0.5, span.last_x + 0.5))
        self.span_readout.setText(span_text(span))
        self.span_readout.setVisible(True)
        if announce:
            self.span_selected.emit(span.first_x, span.last_x)

    def clear_span(self) -> None:
        if self.span is None:
            return
        for plot, region in self._span_regions:
            plot.removeItem(region)
        self._span_regions.clear()
        self.span = None
        self.span_readout.setVisible(False)
        self.span_selected.emit(-1, -1)

    def _clear_highlight(self) -> None:
        for plot, item in self._highlight:
            plot.removeItem(item)
        self._highlight.clear()
        self.highlighted_x = None


def tick_label_width(axis: pg.AxisItem, lo: float, hi: float) -> int:
    """The width a left axis needs for the tick labels of lo..hi (the two levels that get
    text), its text offset included."""
    length = max(50, int(axis.geometry().height()))
    metrics = QFontMetrics(axis.style["tickFont"] or axis.font())
    widest = 0
    for spacing, values in axis.tickValues(lo, hi, length)[:2]:
        for text in axis.tickStrings(values, axis.autoSIPrefixScale * axis.scale, spacing):
            widest = max(widest, metrics.horizontalAdvance(text))
    return widest + axis.style["tickTextOffset"][0] + max(0, axis.style["tickLength"]) + 4
