"""How often the live views repaint: as often as looks good, as rarely as the engine needs.

When the engine's threads occupy every core, each millisecond the UI thread paints is taken
from one of llama.cpp's threads, and because those threads meet at a barrier after every graph
op, the other one waits meanwhile: the UI's CPU time comes straight off the token rate. So the
live views (the plots, the streaming text) ask one pacer before they repaint. It watches the UI
thread's own CPU time and, when the UI uses more than its share of a core, stretches every
view's interval by one common factor (and shrinks it again when there is room). With a spare
core the share is generous and the views run at their base rates.

Pure Python, no Qt: the clocks are injected, so tests drive it with numbers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Of one core, when the engine's threads leave no core free. Measured with `bench ui`, the
# engine loses about 1.1 times the UI's share, and the window may cost it at most 3 %: the
# target leaves room for the work no pacing removes.
CONTENDED_SHARE = 0.015
SPARE_CORE_SHARE = 0.5  # with a free core the UI competes with nobody
WINDOW_S = 0.5  # the UI's CPU share is measured over windows this long
MAX_STRETCH = 100.0  # enough to take every view to its own cap
STEP = 2.0  # the stretch changes by this factor per window
SLACK = 0.2
# The live plots' longest frame interval, however busy the cores: 5 Hz (issue 39: at 0.3 s and
# slower they looked stuck). The plots' timer, the token batches and `bench ui` derive from it.
LIVE_FRAME_MAX_S = 0.2


def ui_share_target(engine_threads: int, cores: int | None = None) -> float:
    """The share of one core the UI thread may use while the engine generates."""
    cores = cores or os.cpu_count() or 1
    return SPARE_CORE_SHARE if cores - engine_threads >= 1 else CONTENDED_SHARE


@dataclass(slots=True)
class UiPacer:
    target_share: float = SPARE_CORE_SHARE
    wall: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] = time.thread_time  # the UI thread's CPU clock: call it there
    stretch: float = 1.0
    share: float = -1.0  # the UI thread's CPU share over the last window (-1: not yet measured)
    _window_start: tuple[float, float] | None = None
    _last: dict[str, float] = field(default_factory=dict)
    answering: bool = False  # an answer is streaming (the engine is busy)
    _answer_stretch: float = 1.0  # where the last answer left the stretch

    def answer_started(self) -> None:
        """An answer starts streaming: begin where the last one ended. The stretch relaxes
        between answers, so the idle window is lively, but ramping up again would take a few
        seconds of every answer."""
        self.answering = True
        self.stretch = max(self.stretch, self._answer_stretch)

    def answer_ended(self) -> None:
        self.answering = False
        self._answer_stretch = self.stretch

    def due(self, view: str, base_s: float, max_s: float) -> bool:
        """Whether `view` may repaint now; if so, its next repaint is due an interval after
        this one was. `base_s` is its interval with no contention, `max_s` the longest it is
        stretched to."""
        now = self._sample()
        interval = self.interval(base_s, max_s)
        last = self._last.get(view)
        # A timer ticking at the base interval fires a little early now and then; without
        # the slack such a tick would be skipped and the view would run at half its rate.
        if last is not None and now - last < interval * (1 - SLACK):
            return False
        # At a fixed rate: counted from when this repaint was due, not from the tick that
        # came (late, on busy cores), so late ticks do not add up to a slower rate (issue 39:
        # 0.2 s frames came every 0.3 s). After a pause (no data, hidden), from now.
        on_time = last is not None and now - last < 2 * interval
        self._last[view] = last + interval if on_time else now
        return True

    def interval(self, base_s: float, max_s: float) -> float:
        return min(max_s, base_s * self.stretch)

    def wait(self, view: str, base_s: float, max_s: float) -> float:
        """Seconds until `view` is due again (0: now), for a timer to sleep until then. Counted
        from when its last repaint was due, not from when that repaint ended: a frame spread
        over ticks would also wait for its own painting (a view capped at 0.2 s ran at 0.3 s)."""
        last = self._last.get(view)
        if last is None:
            return 0.0
        return max(0.0, last + self.interval(base_s, max_s) - self.wall())

    def _sample(self) -> float:
        wall, cpu = self.wall(), self.cpu()
        if self._window_start is None:
            self._window_start = (wall, cpu)
            return wall
        wall0, cpu0 = self._window_start
        if wall - wall0 >= WINDOW_S:
            self.share = (cpu - cpu0) / (wall - wall0)
            if self.share > self.target_share:
                self.stretch = min(MAX_STRETCH, self.stretch * STEP)
            elif self.share < self.target_share / 2:
                self.stretch = max(1.0, self.stretch / STEP)
            self._window_start = (wall, cpu)
        return wall


def pace_note(interval_s: float, slowed_from_s: float = 0.1) -> str:
    """A few words for the user when a view refreshes slower than usual, else ""."""
    if interval_s <= slowed_from_s:
        return ""
    return f"refreshing every {interval_s:.1f} s: the engine is using every core"


_shared = UiPacer()


def shared_pacer() -> UiPacer:
    """The window's one pacer: every live view shares the same budget."""
    return _shared
