"""One thread for every llama.cpp call a command makes: load, turns, close.

The main thread only waits, so Ctrl-C reaches it at once, even while llama.cpp is inside a long
load or prefill, and becomes a request (cancel the load, stop the answer) instead of an
exception raised inside a ctypes callback, where it would be swallowed. One thread for all the
calls, because llama.cpp's compute threads are tied to the thread that runs them: a load on one
thread and turns on another give two pools that fight over the cores.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class EngineThread:
    def __init__(self) -> None:
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def call(self, fn: Callable[[], T], on_interrupt: Callable[[], None]) -> T:
        """`fn()` on the engine thread; each Ctrl-C meanwhile calls `on_interrupt` (which should
        make `fn` end soon) and the wait goes on, so nothing is freed under a running call."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def job() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # re-raised on the caller's thread
                box["error"] = exc
            finally:
                done.set()

        self._jobs.put(job)
        # Wait on an Event, not Thread.join: a KeyboardInterrupt inside join() can mark a thread
        # that is still running as finished (CPython 3.11), and the model would then be freed
        # under a live decode.
        while not done.is_set():
            try:
                done.wait(0.1)
            except KeyboardInterrupt:
                on_interrupt()
        if "error" in box:
            raise box["error"]
        return box["value"]

    def stop(self) -> None:
        self._jobs.put(None)
