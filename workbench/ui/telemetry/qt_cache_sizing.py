"""The cache-sizing view: where the expert cache's budget sits on this conversation's curve.

From the routing the session recorded for the open conversation, hit rate against cache size
for the engine's LRU and for Belady's optimum (the ceiling of any smarter eviction or
prefetch), the budget in force marked, the cliff (under one generated token's experts) shaded,
and the reads per token a budget implies (a label for the budget in force, and for whatever
budget the pointer hovers).

The replay is pure Python over every recorded lookup, so it never runs on the UI thread: the
routes are fetched from the engine thread, the curves computed on a worker thread, and only
drawn here. It runs after an answer ends and only while the view is on screen (a hidden view
is marked stale and catches up when shown), because on a small machine those seconds of CPU
come off the next answer.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QStackedLayout, QVBoxLayout, QWidget

from workbench.engine.requests import SessionError
from workbench.moe.cache_sizing import SizingCurves, compute_curves
from workbench.moe.route_trace import RouteTrace
from workbench.moe.routes import Phase
from workbench.ui.qt_replay_plot import SizingItems
from workbench.ui.qt_text_style import SMALL_PX, dim_text

NEEDS_STREAMING = "needs expert streaming (the streamer records the routing)"
READING = "reading this conversation's routing…"
COMPUTING = "computing the curves from this conversation's routing…"
WATCH_MS = 400
FetchRoutes = Callable[[], Awaitable[RouteTrace | None]]


def _mib(value: float) -> str:
    return f"{value:.2f} MiB" if value >= 0 else "n/a"


def _pct(value: float) -> str:
    return f"{value:.1f} %" if value >= 0 else "n/a"


class QtCacheSizing(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.curves: SizingCurves | None = None
        self.computations = 0  # finished replays (tests)
        self._stale = False
        self._fetch: FetchRoutes | None = None
        self._generation = itertools.count()
        self._current = -1
        self._task: asyncio.Task[Any] | None = None

        self.message = QLabel(NEEDS_STREAMING)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        dim_text(self.message)
        self.message.setWordWrap(True)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.plot = self.graphics.addPlot()
        self.plot.setTitle("Hit rate vs expert cache size (this conversation)", size="9pt")
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.items = SizingItems(self.plot)
        self.budget_label = QLabel()
        dim_text(self.budget_label, pixel_size=SMALL_PX)
        self.budget_label.setWordWrap(True)
        self.readout = QLabel("Hover the plot to read what a budget would cost per token")
        dim_text(self.readout, pixel_size=SMALL_PX)
        self.readout.setWordWrap(True)
        page = QWidget()
        column = QVBoxLayout(page)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.graphics, 1)
        column.addWidget(self.budget_label)
        column.addWidget(self.readout)
        self.pages = QStackedLayout(self)
        self.pages.addWidget(self.message)
        self.pages.addWidget(page)
        self._hover_proxy = pg.SignalProxy(
            self.graphics.scene().sigMouseMoved, rateLimit=10, slot=self._hover)
        # While stale and hidden: a slow look whether the view came on screen (a dock behind
        # another tab stays isVisible() to Qt, and raising it sends no show event).
        self._watch = QTimer(self)
        self._watch.setInterval(WATCH_MS)
        self._watch.timeout.connect(self._check_stale)

    # ---- state in -----------------------------------------------------------------------------

    def set_model(self, model: Any) -> None:
        """A model was loaded (a `LoadedModel`) or unloaded (None): forget the curves."""
        self.curves = None
        self._current = next(self._generation)  # a replay still running is for the old model
        if model is None:
            self._say("no model loaded")
        elif not (model.is_moe and model.config.moe_stream):
            self._say(NEEDS_STREAMING)
        else:
            self._say("the curves appear after the first answer of a conversation")

    def request(self, fetch: FetchRoutes) -> None:
        """New routing may exist (an answer ended, another conversation opened): recompute now
        if the view is on screen, else when it is shown."""
        self._fetch = fetch
        if self.on_screen:
            self._start()
        else:
            self._stale = True
            self._watch.start()

    @property
    def on_screen(self) -> bool:
        view = self.graphics.viewport() if self.pages.currentIndex() == 1 else self.message
        return view.isVisible() and not view.visibleRegion().isEmpty()

    def _check_stale(self) -> None:
        if not self._stale:
            self._watch.stop()
        elif self.on_screen and self._fetch is not None:
            self._start()

    async def wait_idle(self) -> None:
        """Wait for a running replay (tests)."""
        while self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    # ---- computing --------------------------------------------------------------------------

    def _start(self) -> None:
        self._stale = False
        self._watch.stop()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._current = next(self._generation)
        if self.curves is None:  # not "after the first answer" while it is being read
            self._say(READING)
        self._task = asyncio.get_running_loop().create_task(self._refresh(self._current))

    async def _refresh(self, generation: int) -> None:
        assert self._fetch is not None
        try:
            trace = await self._fetch()  # on the engine thread
        except SessionError:  # no model any more (closing, or the load failed)
            if generation == self._current:
                self._say("no model loaded")
            return
        if generation != self._current:
            return
        if trace is None:
            self._say(NEEDS_STREAMING)
            return
        if not any(t.load.phase is Phase.DECODE for t in trace.loads):
            self._say("the curves appear after the first answer of a conversation")
            return
        loads = [(t.turn, t.load) for t in trace.loads]
        if self.curves is None:
            self._say(COMPUTING)

        def work() -> SizingCurves:
            return compute_curves(loads, trace.meta,
                                  cancelled=lambda: generation != self._current)

        curves = await asyncio.get_running_loop().run_in_executor(None, work)
        if generation != self._current:
            return
        self.show_curves(curves)

    # ---- drawing ----------------------------------------------------------------------------

    def show_curves(self, curves: SizingCurves) -> None:
        self.curves = curves
        self.computations += 1
        self.items.draw(curves)
        self.budget_label.setText(self._budget_text(curves))
        self.pages.setCurrentIndex(1)

    def _budget_text(self, c: SizingCurves) -> str:
        cliff = (f"The cliff: one generated token routes {_mib(c.cliff_mib)} of experts; a "
                 "cache smaller than that hits almost never." if c.cliff_mib > 0 else "")
        if c.current_mib <= 0:
            return f"No expert cache in this session (every routed expert is read). {cliff}"
        lru_hit, bel_hit = c.hit_at(c.current_mib)
        lru_mib, bel_mib = c.reads_at(c.current_mib)
        return (f"Budget {c.current_mib:.0f} MiB: LRU {_pct(lru_hit)} hit, {_mib(lru_mib)} "
                f"read per token; Belady (optimal) {_pct(bel_hit)}, {_mib(bel_mib)}. From "
                f"{c.tokens} generated tokens. {cliff}")

    def readout_at(self, budget_mib: float) -> str:
        c = self.curves
        if c is None:
            return ""
        lru_hit, bel_hit = c.hit_at(budget_mib)
        lru_mib, bel_mib = c.reads_at(budget_mib)
        return (f"At {budget_mib:.0f} MiB: LRU {_pct(lru_hit)} hit, {_mib(lru_mib)} per token; "
                f"Belady {_pct(bel_hit)}, {_mib(bel_mib)} per token")

    def _hover(self, event: tuple[Any, ...]) -> None:
        if self.curves is None:
            return
        pos = event[0]
        if not self.plot.sceneBoundingRect().contains(pos):
            return
        x = self.plot.getViewBox().mapSceneToView(pos).x()
        if 0 <= x <= self.curves.total_mib:
            self.readout.setText(self.readout_at(x))

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.pages.setCurrentIndex(0)
