"""What-if replays of recorded routing: the engine's LRU, Belady's optimum, and dropping.

Everything here works from `RouteLoad`s alone (a route trace file or a session's recorder), in
plain Python over one entry per (layer, expert), at the engine's granularity: one lookup per
distinct expert of a load (a decode token's layer, or a prefill batch's), duplicates inside a
load only re-promote, and eviction runs after the load, from the LRU tail, and never takes an
entry this load looked up (so the cache may exceed its budget for the length of a load). That is
`Streamer::load_layer` / `evict_until_under_budget` in native/src/streamer.cpp, rule for rule, so
the LRU replay's hit rate is the engine's own (a test holds them together on a real run).

Belady evicts, at the same points and under the same protection, the entry whose next use is
farthest away: the ceiling any smarter eviction or prefetcher could reach with this budget.

Dropping replays the engine's cache-aware policy on the LRU: on every generated token (the first
of a turn included: the engine learns each layer's weight chain on the session's first prompt),
a slot is dropped when it is not the top weighted one, its expert is not resident before the
load, and its weight is below `frac / k` (k the load's own top-k). The dropped slot reads nothing
(it is repointed to the top expert). Static top-k (`n_expert_used` k-1, k-2) keeps each decode
token's first slots. Both report reads avoided (decode expert bytes read, against the plain LRU
at the same budget) and the router weight mass discarded: dropped weight over the router's
total decode weight, the engine's `drop_weight_pct` definition. That needs weights in the trace.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from workbench.moe.routes import Phase, Residency, RouteLoad

MIB = 1 << 20
DROP_FRACS = (0.5, 0.75, 1.0)
_NEVER = math.inf


@dataclass(frozen=True, slots=True)
class Lookup:
    """One load as the cache sees it: its layer, distinct experts in first-seen order, phase."""

    layer: int
    experts: tuple[int, ...]
    decode: bool
    token: tuple[int, int]  # (turn, step) of a decode token; (turn, -1) for prefill


@dataclass(slots=True)
class CacheResult:
    """What one policy at one budget did over a replay."""

    budget_bytes: int
    lookups: int = 0
    hits: int = 0
    miss_bytes: int = 0
    decode_lookups: int = 0
    decode_hits: int = 0
    decode_miss_bytes: int = 0
    decode_tokens: int = 0

    def count(self, lookups: int, hits: int, missed_bytes: int, decode: bool) -> None:
        """Tally one load: `lookups` experts looked up, `hits` of them resident."""
        self.lookups += lookups
        self.hits += hits
        self.miss_bytes += missed_bytes
        if decode:
            self.decode_lookups += lookups
            self.decode_hits += hits
            self.decode_miss_bytes += missed_bytes

    @property
    def hit_pct(self) -> float:
        """Hits over every lookup, prefill included: what the engine's counter reports."""
        return 100.0 * self.hits / self.lookups if self.lookups else -1.0

    @property
    def decode_hit_pct(self) -> float:
        return 100.0 * self.decode_hits / self.decode_lookups if self.decode_lookups else -1.0

    @property
    def decode_mib_per_token(self) -> float:
        """Expert MiB read per generated token; -1 with no decode tokens."""
        return self.decode_miss_bytes / MIB / self.decode_tokens if self.decode_tokens else -1.0


@dataclass(frozen=True, slots=True)
class WhatIf:
    """A lossy lever at one budget: decode reads it avoids and router weight it throws away."""

    name: str
    reads_avoided_pct: float  # against the plain LRU at the same budget; -1 if nothing was read
    mass_dropped_pct: float  # NaN when the trace has no router weights
    slots_dropped_pct: float


@dataclass(slots=True)
class BudgetReplay:
    lru: CacheResult
    belady: CacheResult
    what_ifs: list[WhatIf] = field(default_factory=list)
    # The engine's other eviction policies at this budget, cold start, no guard, no prefetch:
    # like for like with `lru` (filled by moe/cache_policies.add_policy_rows).
    policies: dict[str, CacheResult] = field(default_factory=dict)


@dataclass(slots=True)
class ReplayReport:
    n_expert_used: int
    has_weights: bool
    token_demand_bytes: int  # the cliff: one decode token's distinct expert bytes (median)
    total_expert_bytes: int  # every expert the trace's layers hold
    decode_tokens: int
    budgets: list[BudgetReplay] = field(default_factory=list)


# ---- the load sequence ------------------------------------------------------------------------


def lookups(loads: Iterable[tuple[int, RouteLoad]]) -> list[Lookup]:
    """(turn, load) pairs as the cache sees them."""
    out = []
    for turn, load in loads:
        decode = load.phase is Phase.DECODE
        step = load.first_step if decode else -1
        out.append(Lookup(load.layer, tuple(int(e) for e in load.unique_experts()), decode,
                          (turn, step)))
    return out


def _entry_key(layer: int, expert: int) -> int:
    return (layer << 32) | expert


def _count_tokens(seq: Sequence[Lookup]) -> int:
    return len({lk.token for lk in seq if lk.decode})


# ---- LRU ----------------------------------------------------------------------------------------


def replay_lru(seq: Sequence[Lookup], expert_bytes: dict[int, int], budget_bytes: int,
               preloaded: Sequence[tuple[int, int]] = ()) -> CacheResult:
    """The engine's LRU over `seq` (from a warm start: `preloaded` entries, in order)."""
    state = _IncrementalLru(expert_bytes, budget_bytes)
    state.preload(preloaded)
    for lk in seq:
        state.step(lk)
    state.result.decode_tokens = _count_tokens(seq)
    return state.result


# ---- Belady -------------------------------------------------------------------------------------


def replay_belady(seq: Sequence[Lookup], expert_bytes: dict[int, int], budget_bytes: int,
                  preloaded: Sequence[tuple[int, int]] = ()) -> CacheResult:
    """The optimal offline policy at the engine's granularity: evict farthest next use first."""
    out = CacheResult(budget_bytes, decode_tokens=_count_tokens(seq))
    for lk, hits in zip(seq, belady_hits(seq, expert_bytes, budget_bytes, preloaded),
                        strict=True):
        n = len(lk.experts)
        out.count(n, hits, (n - hits) * expert_bytes[lk.layer], lk.decode)
    return out


def belady_hits(seq: Sequence[Lookup], expert_bytes: dict[int, int], budget_bytes: int,
                preloaded: Sequence[tuple[int, int]] = ()) -> Iterator[int]:
    """The hits of each load under Belady's schedule, in order (per load, so that a caller may
    leave a warm-up prefix out of its tally while the decisions there still see the future)."""
    # next_use[i][j]: index of the next load that looks up seq[i].experts[j] again.
    next_use: list[list[float]] = [[] for _ in seq]
    seen: dict[int, float] = {}
    for i in range(len(seq) - 1, -1, -1):
        lk = seq[i]
        keys = [_entry_key(lk.layer, e) for e in lk.experts]
        next_use[i] = [seen.get(k, _NEVER) for k in keys]
        for k in keys:
            seen[k] = i
    resident_next: dict[int, float] = {}  # resident key -> its next use
    sizes: dict[int, int] = {}
    heap: list[tuple[float, int]] = []  # (-next use, key); stale entries skipped on pop
    resident = 0
    for layer, e in preloaded:  # a warm start: the same entries, read before the first load
        size = expert_bytes.get(layer)
        k = _entry_key(layer, e)
        if size is None or k in resident_next:
            continue
        if resident + size > budget_bytes:
            break
        resident += size
        sizes[k] = size
        resident_next[k] = seen.get(k, _NEVER)
        heapq.heappush(heap, (-resident_next[k], k))
    for i, lk in enumerate(seq):
        size = expert_bytes[lk.layer]
        hits = 0
        keys = [_entry_key(lk.layer, e) for e in lk.experts]
        for k, nxt in zip(keys, next_use[i], strict=True):
            if k in resident_next:
                hits += 1
            else:
                resident += size
                sizes[k] = size
            resident_next[k] = nxt
            heapq.heappush(heap, (-nxt, k))
        yield hits
        protected = set(keys)
        held: list[tuple[float, int]] = []
        while resident > budget_bytes and heap:
            neg, k = heapq.heappop(heap)
            if resident_next.get(k) != -neg:
                continue  # stale: evicted, or its next use moved since
            if k in protected:
                held.append((neg, k))
                continue
            del resident_next[k]
            resident -= sizes.pop(k)
        for item in held:
            heapq.heappush(heap, item)


# ---- lossy what-ifs -----------------------------------------------------------------------------


def _decode_mass(loads: Sequence[tuple[int, RouteLoad]]) -> float:
    return float(sum(np.nansum(ld.weights, dtype=np.float64) for _, ld in loads
                     if ld.phase is Phase.DECODE))


def replay_drop(loads: Sequence[tuple[int, RouteLoad]], expert_bytes: dict[int, int],
                budget_bytes: int, frac: float, base: CacheResult) -> WhatIf:
    """The cache-aware drop policy at `frac`, on the LRU, against the plain LRU `base`."""
    seq = lookups(loads)
    dropped_mass = 0.0
    dropped_slots = 0
    decode_slots = 0
    edited: list[Lookup] = []
    # The drop decision needs residency before the load, which depends on earlier drops: run the
    # LRU one load at a time, editing each load's lookups as it is reached.
    state = _IncrementalLru(expert_bytes, budget_bytes)
    for (_, ld), lk in zip(loads, seq, strict=True):
        if ld.phase is not Phase.DECODE:
            state.step(lk)
            edited.append(lk)
            continue
        keep_rows: list[int] = []
        for t in range(ld.n_tokens):
            w = ld.weights[t]
            top = int(np.argmax(w))
            k = ld.top_k
            thr = frac / k
            for j in range(k):
                decode_slots += 1
                e = int(ld.experts[t, j])
                if j != top and w[j] < thr and not state.resident(ld.layer, e):
                    dropped_slots += 1
                    dropped_mass += float(w[j])
                    continue
                keep_rows.append(e)
        kept = tuple(dict.fromkeys(keep_rows))
        new = Lookup(lk.layer, kept, True, lk.token)
        state.step(new)
        edited.append(new)
    result = state.result
    result.decode_tokens = _count_tokens(edited)
    total_mass = _decode_mass(loads)
    return WhatIf(
        name=f"drop {frac:g}",
        reads_avoided_pct=_avoided(base, result),
        mass_dropped_pct=100.0 * dropped_mass / total_mass if total_mass > 0 else math.nan,
        slots_dropped_pct=100.0 * dropped_slots / decode_slots if decode_slots else -1.0,
    )


def replay_top_k(loads: Sequence[tuple[int, RouteLoad]], expert_bytes: dict[int, int],
                 budget_bytes: int, keep: int, base: CacheResult) -> WhatIf:
    """`n_expert_used = keep` in decode: each token keeps its `keep` top-ranked slots."""
    edited: list[tuple[int, RouteLoad]] = []
    dropped_mass = 0.0
    dropped_slots = decode_slots = 0
    for turn, ld in loads:
        if ld.phase is Phase.DECODE and ld.top_k > keep:
            cut = ld.weights[:, keep:]
            dropped_mass += float(np.nansum(cut, dtype=np.float64))
            dropped_slots += cut.size
            decode_slots += ld.weights.size
            ld = RouteLoad(ld.layer, ld.phase, ld.first_step, ld.experts[:, :keep],
                           ld.weights[:, :keep], ld.residency[:, :keep], ld.dropped[:, :keep])
        elif ld.phase is Phase.DECODE:
            decode_slots += ld.weights.size
        edited.append((turn, ld))
    result = replay_lru(lookups(edited), expert_bytes, budget_bytes)
    total_mass = _decode_mass(loads)
    has_weights = not any(np.isnan(ld.weights).any() for _, ld in loads
                          if ld.phase is Phase.DECODE)
    return WhatIf(
        name=f"top-k {keep}",
        reads_avoided_pct=_avoided(base, result),
        mass_dropped_pct=(100.0 * dropped_mass / total_mass
                          if has_weights and total_mass > 0 else math.nan),
        slots_dropped_pct=100.0 * dropped_slots / decode_slots if decode_slots else -1.0,
    )


def _avoided(base: CacheResult, other: CacheResult) -> float:
    if base.decode_miss_bytes <= 0:
        return -1.0
    return 100.0 * (1.0 - other.decode_miss_bytes / base.decode_miss_bytes)


class _IncrementalLru:
    """The LRU of `replay_lru`, advanced one load at a time and queryable between loads."""

    def __init__(self, expert_bytes: dict[int, int], budget_bytes: int) -> None:
        self.expert_bytes = expert_bytes
        self.budget = budget_bytes
        self.cache: OrderedDict[int, int] = OrderedDict()
        self.bytes = 0
        self.result = CacheResult(budget_bytes)

    def resident(self, layer: int, expert: int) -> bool:
        return _entry_key(layer, expert) in self.cache

    def preload(self, entries: Sequence[tuple[int, int]]) -> None:
        """The engine's warm start: entries in order while they fit, not lookups."""
        for layer, e in entries:
            size = self.expert_bytes.get(layer)
            key = _entry_key(layer, e)
            if size is None or key in self.cache:
                continue
            if self.bytes + size > self.budget:
                break
            self.cache[key] = size
            self.bytes += size

    def step(self, lk: Lookup) -> None:
        size = self.expert_bytes[lk.layer]
        hits = 0
        for e in lk.experts:
            key = _entry_key(lk.layer, e)
            if key in self.cache:
                hits += 1
                self.cache.move_to_end(key)
            else:
                self.cache[key] = size
                self.bytes += size
        r = self.result
        r.count(len(lk.experts), hits, (len(lk.experts) - hits) * size, lk.decode)
        # Evict from the tail. Everything this load touched sits at the MRU end, so stopping at
        # the first protected tail entry is the engine's "tail not stamped this generation".
        if self.bytes > self.budget:
            protected = {_entry_key(lk.layer, e) for e in lk.experts}
            while self.bytes > self.budget and self.cache:
                victim = next(iter(self.cache))
                if victim in protected:
                    break
                self.bytes -= self.cache.pop(victim)


def recorded_hit_pct(loads: Sequence[tuple[int, RouteLoad]]) -> float:
    """The hit rate the engine itself recorded in the trace's residency column (one lookup per
    distinct non-dropped expert of a load, as the engine counts); -1 where residency is unknown.
    A replay of the same budget should match it (a budget resized mid-run will not)."""
    lookups_n = hits = 0
    for _, ld in loads:
        if (ld.residency == Residency.UNKNOWN).any():
            return -1.0
        seen: set[int] = set()
        flat_e = ld.experts.reshape(-1)
        flat_r = ld.residency.reshape(-1)
        flat_d = ld.dropped.reshape(-1)
        for e, r, d in zip(flat_e.tolist(), flat_r.tolist(), flat_d.tolist(), strict=True):
            if d or e in seen:
                continue
            seen.add(e)
            lookups_n += 1
            hits += r == Residency.HIT
    return 100.0 * hits / lookups_n if lookups_n else -1.0


# ---- the whole report ---------------------------------------------------------------------------


def token_demand_bytes(seq: Sequence[Lookup], expert_bytes: dict[int, int]) -> int:
    """Median over decode tokens of the distinct expert bytes one token routes: the cliff, below
    which a global LRU evicts each layer's experts before the next token comes back to them."""
    per_token: dict[tuple[int, int], int] = {}
    for lk in seq:
        if lk.decode:
            per_token[lk.token] = per_token.get(lk.token, 0) + len(lk.experts) * expert_bytes[
                lk.layer]
    if not per_token:
        return -1
    return int(np.median(np.fromiter(per_token.values(), dtype=np.int64)))


def replay(loads: Sequence[tuple[int, RouteLoad]], expert_bytes: dict[int, int], n_expert: int,
           n_expert_used: int, budgets_bytes: Sequence[int], *, what_ifs: bool = True,
           cancelled: Callable[[], bool] | None = None,
           preloaded: Sequence[tuple[int, int]] = ()) -> ReplayReport:
    """LRU and Belady at every budget, and (with `what_ifs`) dropping and static top-k."""
    seq = lookups(loads)
    has_weights = bool(loads) and not any(
        np.isnan(ld.weights).any() for _, ld in loads if ld.phase is Phase.DECODE)
    report = ReplayReport(
        n_expert_used=n_expert_used, has_weights=has_weights,
        token_demand_bytes=token_demand_bytes(seq, expert_bytes),
        total_expert_bytes=sum(b * n_expert for b in expert_bytes.values()),
        decode_tokens=_count_tokens(seq),
    )
    for budget in budgets_bytes:
        if cancelled is not None and cancelled():
            break
        lru = replay_lru(seq, expert_bytes, budget, preloaded)
        row = BudgetReplay(lru=lru, belady=replay_belady(seq, expert_bytes, budget, preloaded))
        if what_ifs:
            if has_weights:
                row.what_ifs += [replay_drop(loads, expert_bytes, budget, f, lru)
                                 for f in DROP_FRACS]
            row.what_ifs += [replay_top_k(loads, expert_bytes, budget, n_expert_used - d, lru)
                             for d in (1, 2) if n_expert_used - d >= 1]
        report.budgets.append(row)
    return report


def default_budgets(total_expert_bytes: int, recorded_budget: int, points: int = 8) -> list[int]:
    """Evenly spaced budgets up to every expert, plus the run's own budget."""
    out = {int(total_expert_bytes * i / points) for i in range(1, points + 1)}
    if recorded_budget >= 0:
        out.add(recorded_budget)
    return sorted(b for b in out if b > 0)
