"""The expert activity map against independent records: the route records and an LRU replay.

Each token's `TokenEvent.expert_map` must hold exactly the routings of that token's decode, as
the streamer recorded them load by load, and its residency mask must be the expert cache's
contents, as an independent LRU replay of the same trace predicts. Run on a split-expert model
(qwen3moe) and on gemma4, whose first layer is dense (its row must stay empty).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.gates.lru_replay import replay_lru
from workbench.config import Config
from workbench.engine.requests import ExpertActivity, GenerateRequest, TokenEvent
from workbench.engine.session import Session
from workbench.moe.routes import looked_up
from workbench.moe.synth import ARCHES, moe_layers, spec_for, write_synthetic_moe

PROMPT = "Hello world, this is an expert map test."
N_PREDICT = 12
MIB = 1 << 20
Load = tuple[int, list[int]]


@pytest.fixture(scope="module", params=list(ARCHES))
def model(request, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("expert-map") / f"tiny-{request.param}.gguf"
    return write_synthetic_moe(out, arch=request.param, size="tiny")[0]


@dataclass
class Traced:
    session: Session
    events: list[TokenEvent]
    prefill: list[Load]  # loads of the prompt's decodes
    per_token: list[list[Load]]  # loads of each generated token's decode


@pytest.fixture
def traced():
    sessions: list[Session] = []

    def factory(model: Path, **changes: object) -> Traced:
        config = Config(model=str(model), chat_template=False, n_predict=N_PREDICT, n_ctx=256,
                        n_threads=2, **changes)
        session = Session.open(config, record_routes=True)
        sessions.append(session)
        out = Traced(session, [], [], [])
        recorder = session.streaming.routes if session.streaming else None
        taken = 0

        def take() -> list[Load]:
            nonlocal taken
            loads = recorder.loads() if recorder is not None else []
            new, taken = loads[taken:], len(loads)
            return looked_up(load for _, load in new)

        def on_prefill(_progress) -> None:
            out.prefill.extend(take())

        def on_token(event: TokenEvent) -> None:
            # Same thread, right after this token's decode, whose loads the session has just
            # recorded: the loads since the last call are exactly this token's.
            out.events.append(event)
            out.per_token.append(take())

        result = session.generate(GenerateRequest(text=PROMPT), on_token=on_token,
                                  on_prefill=on_prefill)
        assert result.ok, result.error
        assert len(out.events) == result.summary.n_generated > 0
        return out

    yield factory
    for s in sessions:
        s.close()


def histogram(loads: list[Load], shape: tuple[int, int]) -> np.ndarray:
    """Routed counts per (layer, expert) from the loads of single tokens (where the unique
    ids of a load are its routings)."""
    out = np.zeros(shape, dtype=np.int64)
    for layer, ids in loads:
        for e in ids:
            out[layer, e] += 1
    return out


def facts(model: Path) -> tuple[int, int, list[int], int]:
    arch = model.stem.removeprefix("tiny-")
    spec = spec_for(arch, "tiny")
    return spec.n_layer, spec.n_expert, moe_layers(spec), spec.n_expert_used


def test_each_tokens_routing_equals_its_trace_and_sums_to_the_generation(model, traced):
    n_layer, n_expert, moe, top_k = facts(model)
    run = traced(model, moe_stream=True, cache_mb=2)
    shape = (n_layer, n_expert)
    total = np.zeros(shape, dtype=np.int64)
    for step, (event, loads) in enumerate(zip(run.events, run.per_token, strict=True)):
        activity = event.expert_map
        assert isinstance(activity, ExpertActivity)
        assert activity.routed.shape == shape and activity.resident.shape == shape
        assert [layer for layer, _ in loads] == moe  # one pass over the MoE layers
        expected = histogram(loads, shape)
        assert np.array_equal(activity.routed, expected), f"token {step}"
        assert activity.moe_layers.tolist() == [il in moe for il in range(n_layer)]
        assert activity.routed[moe].sum(axis=1).tolist() == [top_k] * len(moe)
        total += activity.routed
    # Summed over the generation, layer by layer and expert by expert.
    assert np.array_equal(total, histogram([ld for t in run.per_token for ld in t], shape))
    dense = [il for il in range(n_layer) if il not in moe]
    assert not total[dense].any()
    # The native cumulative map also holds the prompt's routings: every routed slot counted once.
    streamer = run.session.streaming.streamer
    snapshot = streamer.expert_map(n_layer, n_expert)
    assert int(snapshot.routed.sum()) == streamer.counters().routed
    ever = histogram(run.prefill + [ld for t in run.per_token for ld in t], shape) > 0
    assert np.array_equal(snapshot.routed > 0, ever)


def test_residency_follows_an_independent_lru_replay_token_by_token(model, traced):
    n_layer, n_expert, _, _ = facts(model)
    run = traced(model, moe_stream=True, cache_mb=1, o_direct=False)
    entry_bytes: dict[int, int] = {}
    for t in run.session.streaming.experts:
        entry_bytes[t.layer] = entry_bytes.get(t.layer, 0) + t.expert_stride
    loads = run.prefill + [ld for t in run.per_token for ld in t]
    states = [step.resident for step in replay_lru(loads, entry_bytes, 1 * MIB)]
    end = len(run.prefill) - 1
    for event, token_loads in zip(run.events, run.per_token, strict=True):
        end += len(token_loads)
        expected = np.zeros((n_layer, n_expert), dtype=bool)
        for layer, e in states[end]:
            expected[layer, e] = True
        assert event.expert_map.cached
        assert np.array_equal(event.expert_map.resident, expected)
    # The budget really was too small for everything.
    assert run.session.streaming.streamer.counters().evictions > 0


def test_a_cache_big_enough_keeps_every_routed_expert_and_no_cache_keeps_none(model, traced):
    n_layer, n_expert, _, _ = facts(model)
    shape = (n_layer, n_expert)
    big = traced(model, moe_stream=True, cache_mb=64)
    ever = histogram(big.prefill + [ld for t in big.per_token for ld in t], shape) > 0
    last = big.events[-1].expert_map
    assert last.cached and np.array_equal(last.resident, ever)

    off = traced(model, moe_stream=True)  # cache_mb=0: shared slots, nothing stays resident
    assert all(not e.expert_map.cached and not e.expert_map.resident.any() for e in off.events)
    assert sum(int(e.expert_map.routed.sum()) for e in off.events) > 0


def test_a_resident_session_sends_no_map(model, traced):
    run = traced(model)
    assert all(e.expert_map is None for e in run.events)
