"""Byte-identity gates: streamed experts must change nothing, and the gates must be able to fail.

Every gate compares the FULL logits bit for bit at every generated step (not just the text) with
the same file run resident, on every architecture with a synthetic model (`synth.ARCHES`: a
split-expert qwen3moe, a fused gemma4) and a split multi-file GGUF. The synthetic models are
built so that experts dominate the output, and a negative control shows that one wrong expert
slice makes the gate fail.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.gates.gate_runs import PROMPT, assert_identical, gate_config, generate, recorded
from tests.gates.lru_replay import replay_lru
from workbench.config import Config
from workbench.engine.requests import GenerateRequest, SessionError
from workbench.engine.session import Session
from workbench.moe.registry import STREAMABLE_ARCHS
from workbench.moe.routes import looked_up
from workbench.moe.synth import ARCHES, write_synthetic_moe

MIB = 1 << 20


@pytest.fixture(scope="module", params=[*ARCHES, "qwen3moe-split"])
def model(request, tmp_path_factory) -> Path:
    arch, _, split = request.param.partition("-")
    out = tmp_path_factory.mktemp("gates") / f"tiny-{request.param}.gguf"
    paths = write_synthetic_moe(out, arch=arch, size="tiny",
                                **({"split_max_tensors": 20} if split else {}))
    assert len(paths) > 1 if split else len(paths) == 1
    return paths[0]


STREAMING_VARIANTS = {
    "cache off": {},
    "cache evicts every token": {"cache_mb": 1},
    "cache holds everything": {"cache_mb": 64},
    "dense anon": {"dense_weights": "anon"},
    "dense mmap": {"dense_weights": "mmap"},
    "O_DIRECT off": {"o_direct": False},
    "1 lane": {"io_threads": 1},
    "4 lanes": {"io_threads": 4},
}


@pytest.mark.parametrize("variant", list(STREAMING_VARIANTS))
def test_streamed_equals_resident(model, run, variant):
    resident = run(model)
    streamed = run(model, moe_stream=True, **STREAMING_VARIANTS[variant])
    assert_identical(resident, streamed)
    counters = streamed.session.streaming.streamer.counters()
    assert counters.read_bytes > 0 and counters.loads > 0  # it really streamed


def test_small_cache_really_evicts_and_big_cache_really_hits(model, run):
    small = run(model, moe_stream=True, cache_mb=1).session.streaming.streamer.counters()
    big = run(model, moe_stream=True, cache_mb=64).session.streaming.streamer.counters()
    assert small.evictions > 0 and big.evictions == 0
    assert big.hit_pct > small.hit_pct


@pytest.mark.parametrize("budget_between_turns", [None, 0])
def test_two_turn_session_with_a_warm_cache(model, budget_between_turns):
    with Session.open(gate_config(model)) as resident, \
            Session.open(gate_config(model, moe_stream=True, cache_mb=2)) as streamed:
        for turn, text in enumerate((PROMPT, " And then the second turn continues")):
            if turn == 1 and budget_between_turns is not None:
                streamed.set_cache_budget_mib(budget_between_turns)
                assert streamed.streaming.streamer.counters().resident_now == 0
            assert_identical(generate(resident, text), generate(streamed, text))


def test_reduced_active_experts_streamed_equals_resident_at_the_same_override(model, run):
    resident = run(model, n_expert_used=1)
    streamed = run(model, moe_stream=True, cache_mb=1, n_expert_used=1)
    assert_identical(resident, streamed)
    full = run(model)
    assert full.token_ids != resident.token_ids  # the override really changed the routing


def test_negative_control_a_wrong_expert_slice_fails_the_gate(model, run, monkeypatch):
    from workbench.engine import streaming as streaming_module

    real_expert_tensors = streaming_module.expert_tensors

    def shifted(path):
        tensors = real_expert_tensors(path)
        # Point one layer's down projection one expert further: expert e reads expert e+1's bytes.
        first = next(t for t in tensors if t.kind == "down")
        wrong = dataclasses.replace(first, offset=first.offset + first.expert_stride)
        return [wrong if t is first else t for t in tensors]

    monkeypatch.setattr(streaming_module, "expert_tensors", shifted)
    resident = run(model)
    broken = run(model, moe_stream=True)
    with pytest.raises(AssertionError, match="logits differ"):
        assert_identical(resident, broken)


@pytest.mark.parametrize("cache_mb", [1, 3])
def test_hit_rate_and_bytes_read_match_an_independent_lru_replay(model, run, cache_mb):
    streamed = run(model, record_routes=True, moe_stream=True, cache_mb=cache_mb, o_direct=False)
    runtime = streamed.session.streaming
    loads = looked_up(recorded(streamed.session))
    entry_bytes: dict[int, int] = {}
    for t in runtime.experts:
        entry_bytes[t.layer] = entry_bytes.get(t.layer, 0) + t.expert_stride
    steps = list(replay_lru(loads, entry_bytes, cache_mb * MIB))
    lookups, hits = sum(s.lookups for s in steps), sum(s.hits for s in steps)
    missed = [s.missed_bytes for s in steps]
    counters = runtime.streamer.counters()
    assert counters.lookups == lookups
    assert counters.hit_pct == pytest.approx(100.0 * hits / lookups)
    # Buffered reads transfer exactly the missed slices.
    assert counters.read_bytes == counters.requested_bytes == sum(missed)


def test_bytes_read_under_o_direct_are_the_missed_slices_up_to_alignment(model, run):
    streamed = run(model, moe_stream=True, cache_mb=1)
    c = streamed.session.streaming.streamer.counters()
    if not c.o_direct:
        pytest.skip("this file system refuses O_DIRECT (the run info says buffered)")
    # Each slice read is widened to 4 KiB boundaries at both ends; at most 3 slices per expert.
    assert c.requested_bytes > 0
    assert c.requested_bytes <= c.read_bytes <= c.requested_bytes + 2 * 4096 * 3 * c.lookups


def test_per_token_streaming_telemetry_is_consistent(model):
    from workbench.engine.sinks import MemorySink

    sink = MemorySink()
    with Session.open(gate_config(model, moe_stream=True, cache_mb=2), sink=sink) as s:
        s.generate(GenerateRequest(text=PROMPT))
    for row in sink.tokens:
        assert row.read_bytes >= 0 and row.io_ms >= 0 and row.mgmt_ms >= 0
        assert row.compute_ms == pytest.approx(max(0.0, row.wall_ms - row.io_ms - row.mgmt_ms))
        assert 0 <= row.cache_hit_pct <= 100 and row.cache_budget_mib == 2
    summary = sink.summaries[0]
    assert summary.moe_read_mib == pytest.approx(sum(r.read_bytes for r in sink.tokens) / MIB)
    assert summary.token_demand_mib > 0 and summary.experts_routed > 0


def test_streaming_a_dense_model_is_refused_with_a_message(embedded_model_path):
    with pytest.raises(SessionError, match=r"dense model.*Turn streaming off"):
        Session.open(Config(model=str(embedded_model_path), moe_stream=True, n_threads=2))


def test_too_many_active_experts_is_refused_with_a_message(model):
    with pytest.raises(SessionError, match="has only 8 experts per layer"):
        Session.open(gate_config(model, n_expert_used=9))


def test_active_experts_on_a_dense_model_is_refused(embedded_model_path):
    with pytest.raises(SessionError, match="not a MoE model"):
        Session.open(Config(model=str(embedded_model_path), n_expert_used=2, n_threads=2))


def test_every_synthetic_architecture_is_registered_and_so_gated():
    # The model fixture runs every gate on each of ARCHES: a synthetic arch the registry did not
    # stream would be refused, not silently skipped.
    assert set(ARCHES) <= STREAMABLE_ARCHS


def test_an_architecture_the_streamer_does_not_know_is_refused(model, monkeypatch):
    from workbench.moe import registry

    monkeypatch.setattr(registry, "STREAMABLE_ARCHS", frozenset({"some-other-moe"}))
    with pytest.raises(SessionError, match=r"does not know yet.*Turn streaming off"):
        Session.open(gate_config(model, moe_stream=True))


def test_cache_cliff_is_announced_and_dense_residency_is_measured(model):
    from workbench.engine.sinks import MemorySink

    sink = MemorySink()
    with Session.open(gate_config(model, moe_stream=True, cache_mb=1), sink=sink) as s:
        assert any("smaller than one token's expert demand" in w for w in s.warnings)
        s.generate(GenerateRequest(text=PROMPT))
    assert all(0.0 <= r.dense_resident_frac <= 1.0 for r in sink.tokens)
    assert sink.tokens[0].dense_resident_frac > 0.9  # anon dense weights were just read
    with Session.open(gate_config(model, moe_stream=True, cache_mb=64)) as s:
        assert s.warnings == []
