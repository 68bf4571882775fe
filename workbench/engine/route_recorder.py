"""A session's routing record: every layer load of every turn, as `RouteLoad`s, bounded.

The turn loop calls `collect` after each prefill chunk and after each generated token (outside
the timed bracket, never per graph node): it drains what the native streamer recorded since the
last call and files it under the turn, phase and context position the loop knows. The route
trace file, `replay` and the window's cache-sizing view all read from here.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterable

import numpy as np

from workbench.moe.routes import Phase, Residency, RouteLoad
from workbench.moe.streamer import ExpertStreamer

# The window keeps this many layer loads (about 1,250 tokens of a 24-layer model): enough for
# the cache-sizing curves of a long conversation, about 20 MiB, and a replay of a few seconds.
WINDOW_MAX_LOADS = 30_000


def take_routes(streamer: ExpertStreamer, phase: Phase, first_step: int) -> list[RouteLoad]:
    """The loads the streamer recorded since the last call, as `RouteLoad`s.

    The one adapter from today's native trace, which keeps only the distinct experts of each
    load (in router-rank order for a decode token), with no weights and no residency: each load
    becomes one row of its distinct experts, weights NaN, residency UNKNOWN. When the native
    route recording (`ExpertStreamer.take_routes()`, per-slot weights, residency and dropped
    flags) lands, this function is where it plugs in.
    """
    out = []
    for layer, ids in streamer.take_trace():
        experts = np.asarray(ids, dtype=np.int32).reshape(1, -1)
        weights, residency, dropped = _unmeasured(experts.shape[1])
        out.append(RouteLoad(layer=layer, phase=phase, first_step=first_step, experts=experts,
                             weights=weights, residency=residency, dropped=dropped))
    return out


@functools.cache
def _unmeasured(width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read-only (weights NaN, residency UNKNOWN, not dropped) rows of one width, shared by every
    load of that width: a recorder of 30,000 loads holds one copy, not 90,000 arrays."""
    arrays = (np.full((1, width), np.nan, dtype=np.float32),
              np.full((1, width), Residency.UNKNOWN, dtype=np.int8),
              np.zeros((1, width), dtype=np.bool_))
    for a in arrays:
        a.flags.writeable = False
    return arrays


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
