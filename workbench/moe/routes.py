"""Routing records: what the router chose at one MoE layer for a batch of tokens.

The native streamer records one `RouteLoad` per layer load (one `ffn_moe_topk-<il>` node: a
decode token, or a prefill micro-batch) when route recording is on. Everything that looks at
routing after the fact reads these: the route trace file, `replay` (LRU, Belady, dropping
what-ifs) and the window's cache-sizing view.

Slots are in router rank order (slot 0 is the top-weighted expert), as the topk node gives them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

import numpy as np


class Phase(IntEnum):
    PREFILL = 0
    DECODE = 1


class Residency(IntEnum):
    """Whether an expert was in the cache when its layer was looked up (before the load)."""

    UNKNOWN = -1  # not measured (no cache, or recorded without residency)
    MISS = 0
    HIT = 1


@dataclass(frozen=True, slots=True)
class RouteLoad:
    """The routing of one layer load. Arrays are (n_tokens, k), token-major."""

    layer: int
    phase: Phase
    first_step: int  # context position of the batch's first token; -1 if unattributable
    experts: np.ndarray  # int32 expert ids
    weights: np.ndarray  # float32 final applied router weights; NaN where not read
    residency: np.ndarray  # int8 `Residency` values, per slot
    dropped: np.ndarray  # bool: the drop policy discarded this slot
    # Opt-in (trace_scores): each token's full router score row (n_tokens, n_expert) float32, in
    # the space substitution reads it (log probabilities for a softmax router), as the router
    # gave it before any substitution; None when not recorded. NaN rows: not readable.
    scores: np.ndarray | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.experts.shape[0])

    @property
    def top_k(self) -> int:
        return int(self.experts.shape[1]) if self.experts.ndim == 2 else 0

    def unique_experts(self) -> np.ndarray:
        """The distinct experts this load looked up, in the native cache's order: first seen over
        the slots, token-major, a dropped slot counting as its row's top-weighted expert (the
        policy repointed it there; the first maximum, as the native rule picks it)."""
        ids = self.experts
        if self.dropped.size and self.dropped.any():
            ids = ids.copy()
            for t in np.flatnonzero(self.dropped.any(axis=1)):
                ids[t][self.dropped[t]] = ids[t][int(np.argmax(self.weights[t]))]
        flat = ids.reshape(-1)
        _, first = np.unique(flat, return_index=True)
        return flat[np.sort(first)]


def looked_up(routes: Iterable[RouteLoad]) -> list[tuple[int, list[int]]]:
    """(layer, the distinct experts it looked up) per load, in order: what the expert cache saw
    (see `RouteLoad.unique_experts`), as the LRU replays and `route_stats` take it."""
    return [(route.layer, [int(e) for e in route.unique_experts()]) for route in routes]
