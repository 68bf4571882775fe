"""Events from a worker thread to the asyncio loop, in batches, in order (Qt-free).

Two ways to wait, chosen at construction:
- woken (the default): the worker appends to a deque and wakes the loop only if no wake-up is
  pending; the loop drains everything that arrived. With a quick UI that is one wake-up per
  item; with a busy UI the items that piled up meanwhile cost one wake-up, not one each.
- polled (`poll_s` > 0): the worker only appends, and the loop looks every `poll_s`. A token
  stream then costs the UI a couple of event-loop steps per period instead of a few per token:
  worth it when the consumer shows items at a slower rate anyway (the chat renders text at most
  ten times a second) and when, with no free core, every millisecond of the UI thread comes off
  the engine's token rate. An item waits at most `poll_s` (a number, or a function asked
  before each wait, so the period can follow how busy the machine is).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class EventPipe(Generic[T]):
    def __init__(self, loop: asyncio.AbstractEventLoop,
                 poll_s: float | Callable[[], float] = 0.0) -> None:
        self._loop = loop
        self._poll_s = poll_s if callable(poll_s) else (lambda: poll_s)
        self._polled = self._poll_s() > 0
        self._items: deque[T] = deque()
        self._ready = asyncio.Event()
        self._wake_pending = threading.Event()

    def push(self, item: T) -> None:
        """Any thread. Never blocks."""
        self._items.append(item)
        if self._polled:
            return
        if not self._wake_pending.is_set():
            self._wake_pending.set()
            self._loop.call_soon_threadsafe(self._ready.set)

    async def get_batch(self) -> list[T]:
        """The loop: everything pushed so far (waits for at least one item)."""
        while True:
            if self._polled:
                await asyncio.sleep(self._poll_s())
            else:
                await self._ready.wait()
                self._ready.clear()
                # Cleared before draining: a push from now on schedules a new wake-up, and
                # anything pushed before is drained below.
                self._wake_pending.clear()
            batch = []
            while self._items:
                batch.append(self._items.popleft())
            if batch:
                return batch
