"""What cache-aware substitution at a margin would substitute and read, replayed from recorded
routing that carries the router's score rows (`RouteLoad.scores`, recorded with
`Session.open(record_route_scores=True)`).

The replay runs the engine's LRU (`replay._IncrementalLru`, rule for rule the native cache) one
load at a time; before each decode load (and each prefill load with `prefill`) it applies the
engine's own substitution rule (`moe.streamer.substitute_row`, the native `wb_substitute_row`)
to every token row: the router's ids are the top-k of the recorded scores, residency is the
replayed cache's before the load. On a trace recorded at the same margin and budget the replay
follows the engine exactly (the scores are the router's, taken before substitution), so its
substitutions, lookups and hits equal the engine's counters (`tests/engine/
test_substitute_replay_engine.py`); on a trace recorded without substitution it predicts, with
the caveat that a substituted run's later tokens would have routed differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workbench.moe.replay import CacheResult, Lookup, _count_tokens, _IncrementalLru, lookups
from workbench.moe.routes import Phase, RouteLoad
from workbench.moe.streamer import substitute_row


class MissingScoresError(ValueError):
    """The routing was recorded without score rows, so substitution cannot be replayed."""


@dataclass(frozen=True, slots=True)
class SubstituteReplay:
    margin: float
    result: CacheResult  # the LRU over the substituted routing
    reranked: int  # slots of the rows examined (k per row), as the engine's counter
    substituted: int  # experts brought into a row's set, as the engine's counter


def replay_substitute(loads: Sequence[tuple[int, RouteLoad]], expert_bytes: dict[int, int],
                      budget_bytes: int, margin: float, *, prefill: bool = False,
                      preloaded: Sequence[tuple[int, int]] = ()) -> SubstituteReplay:
    """The LRU at `budget_bytes` with substitution at `margin` applied load by load."""
    state = _IncrementalLru(expert_bytes, budget_bytes)
    state.preload(preloaded)
    reranked = substituted = 0
    edited: list[Lookup] = []
    for (_, ld), lk in zip(loads, lookups(loads), strict=True):
        # Margin 0 on a load with score rows replays the router's own choice (the top-k of its
        # scores): on a trace recorded with substitution on, the routing as run is not that.
        armed = ((margin > 0 or ld.scores is not None) and ld.n_tokens > 0
                 and (ld.phase is Phase.DECODE or prefill))
        if not armed:
            state.step(lk)
            edited.append(lk)
            continue
        if ld.scores is None:
            raise MissingScoresError(
                f"layer {ld.layer}'s routing was recorded without score rows: record it with "
                "`chat --route-trace FILE --route-scores` (record_route_scores) to replay "
                "substitution")
        n_expert = ld.scores.shape[1]
        resident = np.array([state.resident(ld.layer, e) for e in range(n_expert)], np.uint8)
        ids: list[int] = []
        for t in range(ld.n_tokens):
            row = ld.scores[t]
            if not np.isfinite(row).any():  # not readable there: the engine left it alone
                ids.extend(int(e) for e in ld.experts[t])
                continue
            # The router's choice: the top-k of its scores (descending, stable).
            routed = np.argsort(-row, kind="stable")[: ld.top_k].astype(np.int32)
            run, n = substitute_row(row, routed, resident, margin)
            reranked += ld.top_k if margin > 0 else 0
            substituted += n
            ids.extend(int(e) for e in run)
        new = Lookup(lk.layer, tuple(dict.fromkeys(ids)), lk.decode, lk.token)
        state.step(new)
        edited.append(new)
    state.result.decode_tokens = _count_tokens(edited)
    return SubstituteReplay(margin, state.result, reranked, substituted)
