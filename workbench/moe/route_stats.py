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


def demand_curve(loads: Sequence[Load], demand: int, multiples: Sequence[float]) -> list[float]:
    """LRU hit rate (0..1) at caches of `multiples` x one token's expert demand (`demand`:
    experts one token routes over every MoE layer, k x layers): the cliff sits at 1x, so a
    curve in these units compares models of any size."""
    return lru_curve(loads, [max(1, round(m * demand)) for m in multiples])


def popularity_drift(loads: Sequence[Load], n_expert: int, top_frac: float = 0.1
                     ) -> tuple[float, float]:
    """How much a layer's popular experts move with the text, averaged over layers: the share
    of the first half's top `top_frac` experts still in the second half's top, and the share of
    the second half's routings that go to the first half's top. A router with fixed favourites
    gives (1, high); real routers move (Qwen3-30B: 0.62, 0.49). NaN without two halves."""
    n_top = max(1, round(top_frac * n_expert))
    kept: list[float] = []
    share: list[float] = []
    for sets in by_layer(loads).values():
        half = len(sets) // 2
        if half == 0:
            continue
        first, second = (np.zeros(n_expert, dtype=np.int64) for _ in range(2))
        for counts, part in ((first, sets[:half]), (second, sets[half:])):
            for s in part:
                counts[list(s)] += 1
        top_first = set(np.argsort(-first, kind="stable")[:n_top].tolist())
        top_second = set(np.argsort(-second, kind="stable")[:n_top].tolist())
        kept.append(len(top_first & top_second) / n_top)
        share.append(float(second[list(top_first)].sum() / second.sum()) if second.sum() else
                     float("nan"))
    if not kept:
        return float("nan"), float("nan")
    return float(np.mean(kept)), float(np.nanmean(share))


DEMAND_MULTIPLES = (1.5, 2.0, 3.0, 5.0)


@dataclass(frozen=True)
class RoutingFigures:
    """The figures that say how a router treats an expert cache, in units any model shares."""

    lru_at_demand: tuple[float, ...]  # LRU hit rate at DEMAND_MULTIPLES x one token's demand
    consecutive_overlap: float
    top10_share: float
    drift_kept: float  # popularity_drift
    drift_share: float
    top_slot_mean: float  # router weights, normalised per row (k slots)
    top_slot_p10: float
    below_075k_slots: float  # non-top slots below 0.75/k ...
    below_075k_mass: float  # ... and the weight mass they hold


def routing_figures(loads: Sequence[Load], weights: np.ndarray, *, n_expert: int,
                    n_expert_used: int, n_layers: int) -> RoutingFigures:
    """Every RoutingFigures figure from decode loads and their (tokens, k) router weights (rows
    renormalised to 1: a router that does not normalise is compared by its shape)."""
    w = np.asarray(weights, dtype=np.float64)
    sums = w.sum(axis=1, keepdims=True)
    w = np.divide(w, sums, out=np.full_like(w, np.nan), where=sums > 0)
    wf = weight_figures(w)
    kept, share = popularity_drift(loads, n_expert)
    curve = demand_curve(loads, n_expert_used * n_layers, DEMAND_MULTIPLES)
    return RoutingFigures(
        lru_at_demand=tuple(curve), consecutive_overlap=consecutive_overlap(loads),
        top10_share=top_expert_share(loads, n_expert), drift_kept=kept, drift_share=share,
        top_slot_mean=wf.top_slot_mean, top_slot_p10=wf.top_slot_p10,
        below_075k_slots=wf.below_share.get(0.75, float("nan")),
        below_075k_mass=wf.below_mass.get(0.75, float("nan")))


# Real routing, the bench router's target (issue 35): these figures measured on the upstream
# engine's published Qwen3-30B-A3B trace (../shared/fixtures/upstream/qwen3-30b.route.csv,
# decode loads; its README lists the same), and how far a synthetic router may stand from each
# to be called calibrated. The test that reads the trace holds these numbers to it.
REAL_QWEN3_30B = RoutingFigures(
    lru_at_demand=(0.385, 0.476, 0.634, 0.790), consecutive_overlap=0.38, top10_share=0.58,
    drift_kept=0.62, drift_share=0.49, top_slot_mean=0.265, top_slot_p10=0.209,
    below_075k_slots=0.323, below_075k_mass=0.167)
TOLERANCE = RoutingFigures(
    lru_at_demand=(0.07, 0.07, 0.07, 0.07), consecutive_overlap=0.08, top10_share=0.08,
    drift_kept=0.15, drift_share=0.10, top_slot_mean=0.10, top_slot_p10=0.10,
    below_075k_slots=0.15, below_075k_mass=0.07)


@dataclass(frozen=True)
class FigureCheck:
    name: str
    measured: float
    target: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return abs(self.measured - self.target) <= self.tolerance  # NaN is never ok


def against(measured: RoutingFigures, target: RoutingFigures = REAL_QWEN3_30B,
            tolerance: RoutingFigures = TOLERANCE) -> list[FigureCheck]:
    """Each figure beside its target and tolerance (the LRU curve one check per multiple)."""
    out = [FigureCheck(f"lru@{m:g}x_demand", a, b, t) for m, a, b, t in zip(
        DEMAND_MULTIPLES, measured.lru_at_demand, target.lru_at_demand,
        tolerance.lru_at_demand, strict=True)]
    for name in ("consecutive_overlap", "top10_share", "drift_kept", "drift_share",
                 "top_slot_mean", "top_slot_p10", "below_075k_slots", "below_075k_mass"):
        out.append(FigureCheck(name, getattr(measured, name), getattr(target, name),
                               getattr(tolerance, name)))
    return out
