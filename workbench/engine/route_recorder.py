"""A session's routing record: every layer load of every turn, as `RouteLoad`s, bounded.

The turn loop calls `collect` after each prefill chunk and after each generated token (outside
the timed bracket, never per graph node): it drains what the native streamer recorded since the
last call and files it under the turn, phase and context position the loop knows. The route
trace file, `replay` and the window's cache-sizing view all read from here.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable

from workbench.moe.routes import Phase, RouteLoad
from workbench.moe.streamer import ExpertStreamer

# The window keeps this many layer loads (about 1,250 tokens of a 24-layer model): enough for
# the cache-sizing curves of a long conversation, about 20 MiB, and a replay of a few seconds.
WINDOW_MAX_LOADS = 30_000


def take_routes(streamer: ExpertStreamer, phase: Phase, first_step: int) -> list[RouteLoad]:
    """The loads the streamer recorded since the last call (per-slot weights, residency and
    dropped flags). The native records carry their own phase and position; `phase` and
    `first_step` (what the turn loop knows) fill in a record whose position is unknown."""
    out = []
    for load in streamer.take_routes():
        if load.first_step < 0 and load.n_tokens > 0 and first_step >= 0:
            load = dataclasses.replace(load, first_step=first_step, phase=phase)
        out.append(load)
    return out


class RouteRecorder:
    """(turn, RouteLoad) pairs in order, the oldest dropped past `max_loads` (None: keep all)."""

    def __init__(self, streamer: ExpertStreamer, max_loads: int | None = None) -> None:
        self._streamer = streamer
        self._loads: deque[tuple[int, RouteLoad]] = deque(maxlen=max_loads)
        self.dropped_loads = 0  # how many old loads the bound has pushed out
        self._conversation_of: dict[int, str | None] = {}  # turn -> its conversation

    def begin_turn(self, turn: int, conversation: str | None) -> None:
        self._conversation_of[turn] = conversation

    def collect(self, turn: int, phase: Phase, first_step: int) -> None:
        for load in take_routes(self._streamer, phase, first_step):
            if self._loads.maxlen is not None and len(self._loads) == self._loads.maxlen:
                self.dropped_loads += 1
            self._loads.append((turn, load))

    def discard_pending(self) -> None:
        """Forget what the streamer recorded that belongs to no turn (the capture warm-up)."""
        take_routes(self._streamer, Phase.PREFILL, -1)

    def loads(self, turns: Iterable[int] | None = None) -> list[tuple[int, RouteLoad]]:
        """A copy of the record (RouteLoads are immutable), optionally of some turns only."""
        if turns is None:
            return list(self._loads)
        wanted = set(turns)
        return [(t, ld) for t, ld in self._loads if t in wanted]

    def turns_of(self, conversation: str | None) -> list[int]:
        """The turns recorded for a conversation (None: the CLI's one conversation)."""
        return [t for t, c in self._conversation_of.items() if c == conversation]

    @property
    def last_turn(self) -> int:
        return self._loads[-1][0] if self._loads else -1
