"""Background coroutines of the window: held by strong references, failures surfaced.

A task nobody references can be garbage-collected mid-flight, and an exception nobody retrieves
is lost; both are classic asyncio traps in GUI code. `Tasks.spawn` keeps every task until it
ends and hands any exception to `on_error` (the window shows it where the user is looking).
A name makes the task preemptive: spawning a new task under the same name cancels the older
one (the latest model-file inspection wins, for instance).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("workbench.ui")


class Tasks:
    def __init__(self, on_error: Callable[[BaseException], None] | None = None) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        self._named: dict[str, asyncio.Task[Any]] = {}
        self.on_error = on_error

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str = "") -> asyncio.Task[Any]:
        if name and (old := self._named.get(name)) is not None and not old.done():
            old.cancel()
        task = asyncio.get_running_loop().create_task(coro, name=name or None)
        self._running.add(task)
        if name:
            self._named[name] = task
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        name = task.get_name()
        if self._named.get(name) is task:
            del self._named[name]
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        log.error("background task %s failed", name, exc_info=exc)
        if self.on_error is not None:
            self.on_error(exc)

    @property
    def running(self) -> int:
        return len(self._running)

    async def wait_idle(self) -> None:
        """Wait for every task spawned so far (used on close and by tests)."""
        while self._running:
            await asyncio.wait(set(self._running))

    def cancel_all(self) -> None:
        for task in list(self._running):
            task.cancel()
