"""Events from a worker thread to the asyncio loop, with one wake-up per batch (Qt-free).

The worker appends to a deque and wakes the loop only if no wake-up is pending; the loop drains
everything that arrived. With a quick UI that is one wake-up per token, exactly like
`call_soon_threadsafe(queue.put_nowait, ev)`; with a busy UI (a long repaint) the tokens that
piled up meanwhile cost one wake-up, not one each. Order is kept.

With `linger_s`, the loop waits that long after a wake-up before draining, and the worker
does not wake it meanwhile: a token stream then costs a couple of wake-ups per linger period
instead of a few per token. Worth it when the consumer shows the items at a slower rate anyway
(the chat renders text at most ten times a second), and the UI thread's every millisecond comes
off the engine's token rate on a machine with no free core.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class EventPipe(Generic[T]):
    def __init__(self, loop: asyncio.AbstractEventLoop, linger_s: float = 0.0) -> None:
        self._loop = loop
        self._linger_s = linger_s
        self._items: deque[T] = deque()
        self._ready = asyncio.Event()
        self._wake_pending = threading.Event()

    def push(self, item: T) -> None:
        """Any thread. Never blocks."""
        self._items.append(item)
        if not self._wake_pending.is_set():
            self._wake_pending.set()
            self._loop.call_soon_threadsafe(self._ready.set)

    async def get_batch(self) -> list[T]:
        """The loop: everything pushed so far (waits for at least one item)."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            if self._linger_s > 0:
                await asyncio.sleep(self._linger_s)  # pushes meanwhile find a wake-up pending
            # Cleared before draining: a push from now on schedules a new wake-up, and
            # anything pushed before is drained below.
            self._wake_pending.clear()
            batch = []
            while self._items:
                batch.append(self._items.popleft())
            if batch:
                return batch
