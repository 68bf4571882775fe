"""The bounded queue: one request runs on the engine, at most `max_waiting` wait their turn,
and one past that is refused at once with 429 and a Retry-After from recent request times.

The waiting itself is the engine thread's job queue (requests run in the order admitted), so
this only counts; it lives on the server's event loop (one thread) and needs no lock.
"""

from __future__ import annotations

import math
from collections import deque

from workbench.server.errors import ApiError


class Admission:
    def __init__(self, max_waiting: int) -> None:
        self.max_waiting = max_waiting
        self.in_flight = 0  # admitted requests whose engine work has not finished
        self.refused = 0
        self._recent: deque[float] = deque(maxlen=16)  # seconds the last requests took

    def admit(self) -> None:
        if self.in_flight >= 1 + self.max_waiting:
            self.refused += 1
            wait = self.expected_wait()
            raise ApiError(
                429, f"the server is busy: {self.in_flight} requests are running or queued "
                f"(the queue holds {self.max_waiting}); retry in about {wait} s",
                type="rate_limit_error", code="queue_full",
                headers={"Retry-After": str(wait)})
        self.in_flight += 1

    def release(self, seconds: float) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self._recent.append(seconds)

    def expected_wait(self) -> int:
        """Whole seconds until a place is likely free (at least 1)."""
        typical = sorted(self._recent)[len(self._recent) // 2] if self._recent else 1.0
        return max(1, math.ceil(typical * max(1, self.in_flight - self.max_waiting)))
