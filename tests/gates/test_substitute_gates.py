"""Gates for cache-aware expert substitution (G8d, G8e) and their negative controls.

Substitution is lossy by design, so, like dropping's, its gates prove the machinery: a margin
too small to settle any tie (1e-6) is bit-identical to the same cached run without it while
every decode routing was examined (G8d), and the full margin (1.0) changes routings on every
test architecture (G8e: a count of 0 fails). The controls show each gate can fail: the full
margin changes the logits (G8d's identity check trips), and the inert margin substitutes nothing
(G8e's count check trips). Every run streams through the dropping gates' evicting cache
(cache_mb 2: one token's experts fit, not all of them), so the resident set keeps changing and
substitution has misses to avoid; n_ubatch 1 as there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest

from tests.gates.gate_runs import Run, assert_identical, recorded
from tests.gates.test_streaming_gates import model
from workbench.moe.routes import Phase, Residency
from workbench.moe.streamer import DEBUG_POISON_UNLOADED, ExpertStreamer

__all__ = ["model"]  # the module-scoped fixture of the byte-identity gates, reused here

EVICTING = {"moe_stream": True, "cache_mb": 2, "o_direct": False}
INERT, FULL = 1e-6, 1.0


@pytest.fixture
def run(run: Callable[..., Run]) -> Callable[..., Run]:
    return functools.partial(run, n_ubatch=1)


def _counters(r: Run):
    return r.session.streaming.streamer.counters()


def test_g8d_an_inert_margin_is_bit_identical_and_examines_every_decode_routing(model, run):
    cached = run(model, **EVICTING)
    inert = run(model, record_routes=True, expert_substitute=INERT, **EVICTING)
    assert_identical(cached, inert)
    c = _counters(inert)
    decode_slots = sum(x.experts.size for x in recorded(inert.session)
                       if x.phase == Phase.DECODE)
    assert c.experts_reranked == decode_slots > 0  # decode only: prefill was not asked for
    assert c.experts_substituted == 0
    assert c.evictions > 0  # the cache really evicted: there were misses to avoid


def test_g8e_the_full_margin_substitutes_on_every_architecture(model, run):
    full = run(model, record_routes=True, expert_substitute=FULL, **EVICTING)
    c = _counters(full)
    assert c.experts_substituted > 0, "the full margin substituted nothing"
    assert c.experts_reranked > c.experts_substituted
    # The routing that ran is the one recorded: with residency before the load, a token's
    # experts are more often resident than the plain run's (that is what substitution is for).
    plain = run(model, record_routes=True, **EVICTING)

    def hit_share(r: Run) -> float:
        res = [x.residency for x in recorded(r.session) if x.phase == Phase.DECODE]
        flat = np.concatenate([x.reshape(-1) for x in res])
        return float((flat == Residency.HIT).mean())

    assert hit_share(full) > hit_share(plain)


def test_controls_the_full_margin_breaks_identity_and_the_inert_one_substitutes_nothing(
        model, run):
    cached = run(model, **EVICTING)
    full = run(model, expert_substitute=FULL, **EVICTING)
    with pytest.raises(AssertionError, match="logits differ"):
        assert_identical(cached, full)  # G8d's check can fail
    inert = run(model, expert_substitute=INERT, **EVICTING)
    assert _counters(inert).experts_substituted == 0  # G8e's count would be 0


def test_prefill_substitutes_only_when_asked_and_composes_with_dropping(model, run, monkeypatch):
    # Poisoned slices (NaN) for everything not loaded: substitution and dropping together must
    # still only ever run experts the cache holds or the load read.
    monkeypatch.setattr(ExpertStreamer, "debug_flags", DEBUG_POISON_UNLOADED)
    both = run(model, record_routes=True, expert_substitute=FULL, expert_substitute_prefill=True,
               drop_cold_frac=1.0, drop_prefill=True, **EVICTING)
    assert all(np.isfinite(x).all() for x in both.logits)
    c = _counters(both)
    loads = recorded(both.session)
    assert c.experts_reranked == sum(x.experts.size for x in loads) > 0  # prefill included
    # Dropping examined every routing after substitution changed it (at margin 1.0 on a top-2
    # model the routing is often all resident, leaving nothing to drop: that is composition).
    assert c.experts_substituted > 0 and c.experts_routed == c.routed > 0
