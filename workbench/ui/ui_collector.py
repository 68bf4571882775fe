"""Cyclic garbage is collected on the UI thread only, and not while an answer streams.

Python runs a cycle collection on whichever thread happens to allocate when a threshold is
crossed. Qt wrappers are often part of cycles (a widget and the closures connected to it), so an
automatic collection on the engine thread or the database thread destroyed Qt objects there:
~QObject took a Qt mutex and then waited for the GIL, while the UI thread held the GIL and waited
for that mutex, and the window froze (seen as a hang in the UI tests). So the window turns the
automatic collector off and collects from a timer on its own thread, by the same per-generation
thresholds Python uses, and skips it while an answer streams: a full collection over the window's
objects stalls the loop for ~100 ms.

Qt-free: the timer that calls `tick()` lives with the window (qt_app.py).
"""

from __future__ import annotations

import gc
import threading

TICK_MS = 500  # how often the UI thread looks at the collector's counts


class UiCollector:
    def __init__(self) -> None:
        self._paused = 0
        self._owner: int | None = None

    def install(self) -> None:
        """Take over from the automatic collector; call on the UI thread."""
        self._owner = threading.get_ident()
        gc.disable()

    def uninstall(self) -> None:
        gc.enable()
        self._owner = None

    def pause(self) -> None:
        """No collections until `resume()` (nested calls count)."""
        self._paused += 1

    def resume(self) -> None:
        self._paused = max(0, self._paused - 1)

    @property
    def paused(self) -> bool:
        return self._paused > 0

    def due_generation(self) -> int:
        """The oldest generation whose count passed its threshold (-1: none), as the automatic
        collector decides."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        due = -1
        for generation, (count, threshold) in enumerate(zip(counts, thresholds, strict=True)):
            if threshold and count > threshold:
                due = generation
        return due

    def tick(self) -> int:
        """Collect what is due, on the UI thread only; the generation collected (-1: none)."""
        if self.paused or threading.get_ident() != self._owner:
            return -1
        generation = self.due_generation()
        if generation >= 0:
            gc.collect(generation)
        return generation


_shared = UiCollector()


def shared_collector() -> UiCollector:
    """The window's one collector."""
    return _shared
