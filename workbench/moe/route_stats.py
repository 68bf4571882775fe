"""Figures that say whether a model's routing behaves like a real one, from a routing trace.

A cache, dropping and replay only mean something on routing that churns: varied tokens, experts
that recur across consecutive tokens without being the same every time, a few hot experts and a
long tail, router weights with a dominant top slot and a tail of small ones. These pure functions
compute those figures from the recorded route loads as the cache looked them up (`routes.looked_up`:
one `(layer, unique expert ids)` per load) and from router weights ((n_tokens, k) arrays, as
`RouteLoad.weights` holds them). The synthetic bench model's tests and the benches share them.

Loads are expected to be decode loads (one token each), in order; leave the prefill's out (keep
the `Phase.DECODE` records), since a prefill load merges a whole batch.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Load = tuple[int, Sequence[int]]


def by_layer(loads: Sequence[Load]) -> dict[int, list[frozenset[int]]]:
    """Each layer's expert sets, one per load in order."""
    out: dict[int, list[frozenset[int]]] = {}
    for layer, ids in loads:
        out.setdefault(layer, []).append(frozenset(int(e) for e in ids))
    return out


def lru_hit_rate(loads: Sequence[Load], capacity: int) -> float:
    """Hit rate (0..1) of an LRU cache over (layer, expert) holding `capacity` experts, with the
    streamer's one extra rule: a load never evicts its own experts. NaN without lookups."""
    cache: OrderedDict[tuple[int, int], None] = OrderedDict()
    lookups = hits = 0
    for layer, ids in loads:
        keys = [(layer, int(e)) for e in ids]
        for key in keys:
            lookups += 1
            if key in cache:
                hits += 1
                cache.move_to_end(key)
            else:
                cache[key] = None
        protected = set(keys)
        while len(cache) > capacity:
            victim = next(iter(cache))
            if victim in protected:
                break
            del cache[victim]
    return hits / lookups if lookups else float("nan")


def lru_curve(loads: Sequence[Load], capacities: Sequence[int]) -> list[float]:
    """`lru_hit_rate` at each capacity (in experts)."""
    return [lru_hit_rate(loads, c) for c in capacities]


def consecutive_overlap(loads: Sequence[Load]) -> float:
    """Mean share of a token's experts (per layer) that the previous token of that layer also
    used: |S_t ∩ S_t-1| / |S_t|. 1.0 is one fixed set (no churn); about k/n_expert is no memory."""
    shares: list[float] = []
    for sets in by_layer(loads).values():
        for prev, cur in itertools.pairwise(sets):
            if cur:
                shares.append(len(prev & cur) / len(cur))
    return float(np.mean(shares)) if shares else float("nan")


def top_expert_share(loads: Sequence[Load], n_expert: int, top_frac: float = 0.1) -> float:
    """Share of the routings that went to each layer's most used `top_frac` of its experts,
    averaged over layers. Uniform routing gives about `top_frac`; real routers give more."""
    n_top = max(1, round(top_frac * n_expert))
    shares: list[float] = []
    for sets in by_layer(loads).values():
        counts = np.zeros(n_expert, dtype=np.int64)
        for s in sets:
            for e in s:
                counts[e] += 1
        total = counts.sum()
        if total:
            shares.append(float(np.sort(counts)[::-1][:n_top].sum() / total))
    return float(np.mean(shares)) if shares else float("nan")


def distinct_share(tokens: Sequence[int]) -> float:
    """Distinct tokens / tokens: near 0 for a repeated token, higher for varied text."""
    return len(set(tokens)) / len(tokens) if tokens else float("nan")


def tail_period(tokens: Sequence[int], tail: int = 64) -> int:
    """The shortest period p (< tail) with which the last `tail` tokens repeat, or 0 when they do
    not repeat at any such period (no short cycle). A repeated token has period 1."""
    seq = list(tokens)[-tail:]
    for p in range(1, len(seq)):
        if all(seq[i] == seq[i - p] for i in range(p, len(seq))):
            return p
    return 0


@dataclass(frozen=True)
class WeightFigures:
    """Router weight figures over decode routings (rows of k final weights each)."""

    top_slot_mean: float  # mean weight of the top slot
    top_slot_p10: float
    top_slot_p90: float
    below_share: dict[float, float]  # frac -> share of non-top slots weighted below frac / k
    below_mass: dict[float, float]  # frac -> router weight mass (of the total) in those slots


def weight_figures(weights: np.ndarray, fracs: Sequence[float] = (0.5, 0.75, 1.0)) -> WeightFigures:
    """What dropping at `frac × 1/k` would have to work with. The top slot is never dropped, so
    it is left out of the below-threshold shares (as the drop policy leaves it)."""
    w = np.asarray(weights, dtype=np.float64)
    w = w[~np.isnan(w).any(axis=1)]
    if w.size == 0:
        nan = float("nan")
        return WeightFigures(nan, nan, nan, {f: nan for f in fracs}, {f: nan for f in fracs})
    k = w.shape[1]
    ordered = -np.sort(-w, axis=1)
    top = ordered[:, 0]
    rest = ordered[:, 1:]
    total = w.sum()
    share: dict[float, float] = {}
    mass: dict[float, float] = {}
    for f in fracs:
        below = rest < f / k
        share[f] = float(below.mean()) if rest.size else 0.0
        mass[f] = float(rest[below].sum() / total) if total else float("nan")
    return WeightFigures(float(top.mean()), float(np.percentile(top, 10)),
                         float(np.percentile(top, 90)), share, mass)
