"""An independent LRU over (layer, expert), the yardstick the streamer's cache is checked against.

It follows the streamer's one rule beyond plain LRU: a load never evicts its own entries.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """One load of the replay: its lookups, hits and missed bytes, and what is resident after."""

    lookups: int
    hits: int
    missed_bytes: int
    resident: frozenset[tuple[int, int]]


def replay_lru(loads: list[tuple[int, list[int]]], entry_bytes: dict[int, int],
               budget: int) -> Iterator[ReplayStep]:
    cache: OrderedDict[tuple[int, int], int] = OrderedDict()
    resident = 0
    for layer, ids in loads:
        hits = missed = 0
        for e in ids:
            key = (layer, e)
            if key in cache:
                hits += 1
                cache.move_to_end(key)
            else:
                cache[key] = entry_bytes[layer]
                resident += entry_bytes[layer]
                missed += entry_bytes[layer]
        protected = {(layer, e) for e in ids}
        while resident > budget:
            victim = next(iter(cache))
            if victim in protected:
                break
            resident -= cache.pop(victim)
        yield ReplayStep(len(ids), hits, missed, frozenset(cache))
