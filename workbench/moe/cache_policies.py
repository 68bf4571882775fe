"""The expert cache's eviction policies, replayed from routing alone (the engine's independent
count).

`native/src/cache_policy.cpp` implements the same rules in the streamer; this module replays them
over `Lookup`s (moe/replay.py) rule for rule, so that a test can hold the engine's hit rate and
bytes read to the replay's for every policy. The shared frame (the engine's `load`):

- one lookup per distinct expert of a load, in first-seen order; every lookup takes the next
  value of a global tick (its recency) and adds 1 to the entry's score (`crf`, below);
- when a load's layer index does not increase, a pass over the layers (one token, or a prefill
  batch) has closed: its distinct expert bytes become the token demand, and every entry's score
  is multiplied by the policy's decay (for all policies, so the state is the same whatever runs);
- after the load, entries are evicted in ascending order of the policy's key until the cache is
  within its budget, never one this load looked up (the cache may exceed its budget for the
  length of a load);
- with the token-cycle guard, while the budget is below the last pass's token demand, an entry a
  load brings in beyond the budget is *transient*: it is evicted before any other, and a load's
  own transient entries do not count against the budget (they leave at the next load), so the
  cache keeps a pinned subset instead of cycling everything through (where LRU hits 0 %).

The policies (key: smaller is evicted first):

- `lru`: the last tick. The engine's historical cache.
- `lfru` (frequency + recency): the score, an exponentially decayed count of lookups (each pass
  multiplies it by `DECAY`, 0.98: a half-life of ~34 tokens), then the last tick. Frequent
  experts survive tokens in which they were not routed; one-off ones go first.
- `layer` (layer-aware, least-stale): in a decode the layers come round in a fixed cycle, so an
  entry of the layer the engine just left is needed a whole token later and one of the next layer
  now. The key is the score divided by the layers until the entry's layer comes round again
  (`staleness`, 1 for the next layer, up to the cycle's length for the current one): hot entries
  of layers about to run are kept, as Belady would, over entries equally hot but needed later.

Prefetch (off by default): after each decode load, the experts the previous decode token looked
up at the next layer (wrapping to the first) that are not resident are brought in, as the newest
entries, not lookups; a later lookup of one is a hit (a prefetch hit), an eviction before any
lookup is waste. The engine reads them on a thread of its own while the layer computes.

All arithmetic is IEEE double (the native side uses double too, in the same order of operations),
so the replay's keys and the engine's compare identically.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.config import BY_NAME, CACHE_POLICIES
from workbench.moe.replay import CacheResult, Lookup, ReplayReport, _count_tokens, _entry_key

POLICIES: tuple[str, ...] = tuple(CACHE_POLICIES)  # declared in config.py, in native code order
DEFAULT_POLICY: str = BY_NAME["cache_policy"].default
# Per closed pass (a token), every score is multiplied by this: a half-life of ~34 tokens. Chosen
# on the bench model's routing (docs/benchmarks.md, bench policy): faster decays (0.5 to 0.9)
# hit 4 to 15 points less at 200 MiB, pure counting (1.0) no more.
DECAY = 0.98


@dataclass(slots=True)
class _Entry:
    layer: int
    crf: float = 0.0
    tick: int = 0
    resident: bool = False
    transient: bool = False
    ahead: bool = False  # prefetched, not yet looked up
    stamp: int = -1  # the load that last looked it up


class PolicyCache:
    """The engine's expert cache under `policy`, one load at a time (see the module doc)."""

    def __init__(self, policy: str, expert_bytes: dict[int, int], budget_bytes: int, *,
                 guard: bool = False, prefetch: bool = False) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown cache policy {policy!r}: choose one of "
                             f"{', '.join(POLICIES)}")
        self.policy = policy
        self.guard = guard
        self.expert_bytes = expert_bytes
        self.budget = budget_bytes
        self.entries: dict[int, _Entry] = {}
        self.resident_bytes = 0
        self.tick = 0
        self.generation = 0
        self.last_layer = -1
        self.pass_bytes = 0
        self.token_demand = 0
        # The cycle's length: layer indices run 0..max, as the native cache's layer table does.
        self.n_layers = max(expert_bytes) + 1 if expert_bytes else 1
        self.result = CacheResult(budget_bytes)
        self.transient_admissions = 0
        self.prefetch = prefetch
        self.layers = sorted(expert_bytes)
        self.last_decode: dict[int, tuple[int, ...]] = {}
        self.prefetch_issued = 0
        self.prefetch_hits = 0
        self.prefetch_wasted = 0  # entries evicted before any lookup

    def resident(self, layer: int, expert: int) -> bool:
        entry = self.entries.get(_entry_key(layer, expert))
        return entry is not None and entry.resident

    def resident_keys(self) -> set[int]:
        return {k for k, e in self.entries.items() if e.resident}

    def preload(self, entries: Sequence[tuple[int, int]]) -> int:
        """Warm start: entries read at open, in order while they fit (the engine's `preload`);
        not lookups. Returns how many were read."""
        taken = 0
        for layer, expert in entries:
            size = self.expert_bytes.get(layer)
            if size is None:
                continue
            key = _entry_key(layer, expert)
            entry = self.entries.get(key)
            if entry is not None and entry.resident:
                continue
            if self.resident_bytes + size > self.budget:
                break
            if entry is None:
                entry = self.entries[key] = _Entry(layer)
            self.tick += 1
            entry.tick = self.tick
            entry.resident = True
            self.resident_bytes += size
            taken += 1
        return taken

    def step(self, lk: Lookup) -> None:
        size = self.expert_bytes[lk.layer]
        if lk.layer <= self.last_layer:
            self._close_pass()
        self.last_layer = lk.layer
        self.generation += 1
        self.pass_bytes += size * len(lk.experts)
        guarding = self.guard and self.budget < self.token_demand
        hits = 0
        for e in lk.experts:
            key = _entry_key(lk.layer, e)
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = _Entry(lk.layer)
            self.tick += 1
            entry.tick = self.tick
            entry.crf += 1.0
            entry.stamp = self.generation
            if entry.resident:
                hits += 1
                if entry.ahead:
                    self.prefetch_hits += 1
                    entry.ahead = False
                continue
            entry.resident = True
            entry.transient = guarding and self.resident_bytes + size > self.budget
            self.transient_admissions += entry.transient
            self.resident_bytes += size
        r = self.result
        r.count(len(lk.experts), hits, (len(lk.experts) - hits) * size, lk.decode)
        self._evict(lk.layer)
        if self.prefetch and lk.decode:
            self._prefetch(lk)

    def _prefetch(self, lk: Lookup) -> None:
        """The previous decode token's experts at the next layer (wrapping), read ahead."""
        self.last_decode[lk.layer] = lk.experts
        nxt = self.layers[(self.layers.index(lk.layer) + 1) % len(self.layers)]
        size = self.expert_bytes[nxt]
        for e in self.last_decode.get(nxt, ()):
            key = _entry_key(nxt, e)
            entry = self.entries.get(key)
            if entry is not None and entry.resident:
                continue
            if entry is None:
                entry = self.entries[key] = _Entry(nxt)
            self.tick += 1
            entry.tick = self.tick
            entry.stamp = self.generation
            entry.resident = True
            entry.ahead = True
            self.resident_bytes += size
            self.prefetch_issued += 1

    def _close_pass(self) -> None:
        self.token_demand = self.pass_bytes
        self.pass_bytes = 0
        for entry in self.entries.values():
            entry.crf *= DECAY

    def _key(self, entry: _Entry, layer_now: int) -> tuple[int, float, int]:
        if self.policy == "lru":
            score = 0.0
        elif self.policy == "lfru":
            score = entry.crf
        else:
            staleness = (entry.layer - layer_now) % self.n_layers or self.n_layers
            score = entry.crf / staleness
        return (0 if entry.transient else 1, score, entry.tick)

    def _evict(self, layer_now: int) -> None:
        # This load's transient entries are needed by its compute and leave at the next load:
        # they do not push a pinned entry out.
        passing = sum(self.expert_bytes[e.layer] for e in self.entries.values()
                      if e.resident and e.transient and e.stamp == self.generation)
        if self.resident_bytes - passing <= self.budget:
            return
        candidates = sorted(
            (self._key(e, layer_now), k) for k, e in self.entries.items()
            if e.resident and e.stamp != self.generation)
        for _, k in candidates:
            if self.resident_bytes - passing <= self.budget:
                break
            entry = self.entries[k]
            entry.resident = False
            entry.transient = False
            if entry.ahead:
                entry.ahead = False
                self.prefetch_wasted += 1
            self.resident_bytes -= self.expert_bytes[entry.layer]


def replay_policy(seq: Sequence[Lookup], expert_bytes: dict[int, int], budget_bytes: int,
                  policy: str, *, guard: bool = False,
                  preloaded: Sequence[tuple[int, int]] = (), prefetch: bool = False
                  ) -> CacheResult:
    """`policy` (with or without the guard and prefetch, from a warm start or cold) over `seq`:
    what the engine's cache would do."""
    cache = PolicyCache(policy, expert_bytes, budget_bytes, guard=guard, prefetch=prefetch)
    cache.preload(preloaded)
    for lk in seq:
        cache.step(lk)
    cache.result.decode_tokens = _count_tokens(seq)
    return cache.result


def add_policy_rows(report: ReplayReport, seq: Sequence[Lookup], expert_bytes: dict[int, int],
                    preloaded: Sequence[tuple[int, int]] = ()) -> ReplayReport:
    """Each budget of a `replay` report gets the other policies' results (the same start as its
    LRU and Belady: `preloaded`; no guard, no prefetch)."""
    for row in report.budgets:
        row.policies = {name: replay_policy(seq, expert_bytes, row.lru.budget_bytes, name,
                                            preloaded=preloaded)
                        for name in POLICIES if name != "lru"}
    return report
