"""The advice's plan: load whole, stream with a cache of what is left, none below the cliff, or
does not fit; dropping only where the probe's replay favours it."""

from __future__ import annotations

import math

from workbench.bench.advise import (
    RESERVE_MIB,
    DropOption,
    Layout,
    Machine,
    ProbeResult,
    plan,
    with_probe,
)

MOE = Layout(weights_mib=20_000.0, expert_mib=18_000.0, dense_mib=2_000.0,
             token_demand_mib=300.0, is_moe=True)
DENSE = Layout(weights_mib=8_000.0, expert_mib=0.0, dense_mib=8_000.0, token_demand_mib=0.0,
               is_moe=False)


def machine(available: float, cores: int = 8) -> Machine:
    return Machine(available_mib=available, total_mib=64_000.0, cores=cores)


def probe(*drops: DropOption) -> ProbeResult:
    return ProbeResult(tokens=32, budget_mib=4000.0, lru_hit_pct=61.0, belady_hit_pct=70.0,
                       mib_per_token=120.0, token_demand_mib=300.0, drops=drops)


def test_a_model_that_fits_loads_whole():
    a = plan(MOE, machine(30_000.0), kv_mib=500.0)
    assert a.verdict == "fits" and not a.stream
    assert a.settings == {"moe_stream": False, "n_threads": 4}  # 8 cores, at most 4 threads
    assert a.flags == "--no-moe-stream -t 4"


def test_a_moe_model_that_does_not_fit_streams_with_what_is_left():
    a = plan(MOE, machine(8_000.0, cores=2), kv_mib=500.0)
    assert a.verdict == "stream" and a.stream
    assert a.cache_mb == int(8_000 - 2_000 - 500 - RESERVE_MIB)
    assert a.threads == 2
    assert a.settings == {"moe_stream": True, "cache_mb": a.cache_mb, "cache_auto": False,
                          "io_threads": 4, "drop_cold_frac": 0.0}
    # Streamed, the count is measured at open (engine/opening.py): no -t to make it explicit.
    assert f"--moe-stream --cache-mb {a.cache_mb}" in a.flags and "-t" not in a.flags.split()


def test_below_one_tokens_experts_no_cache():
    room = 2_000 + 500 + RESERVE_MIB + 200  # 200 MiB left: under the 300 MiB a token routes
    a = plan(MOE, machine(room), kv_mib=500.0)
    assert a.stream and a.cache_mb == 0
    assert "drop_cold_frac" not in a.settings  # dropping needs the cache
    assert any("hits almost nothing" in r for r in a.reasons)


def test_does_not_fit_even_streamed_or_dense():
    a = plan(MOE, machine(3_000.0), kv_mib=500.0)
    assert a.verdict == "does not fit" and not a.stream
    assert "even streamed" in a.reasons[0]
    d = plan(DENSE, machine(4_000.0), kv_mib=500.0)
    assert d.verdict == "does not fit" and "not a Mixture-of-Experts" in d.reasons[0]


def test_unknown_memory_says_so():
    a = plan(MOE, machine(-1.0), kv_mib=500.0)
    assert a.verdict == "unknown" and not a.stream


def test_dropping_only_where_it_pays_for_little_weight():
    streamed = plan(MOE, machine(8_000.0), kv_mib=500.0)
    good = with_probe(streamed, probe(DropOption(0.5, 12.0, 1.0), DropOption(0.75, 20.0, 4.0),
                                      DropOption(1.0, 30.0, 9.0)))
    assert good.drop_cold_frac == 0.75  # the largest within 5 % of the weight
    assert good.settings["drop_cold_frac"] == 0.75
    assert good.probe is not None and good.probe.lru_hit_pct == 61.0
    weak = with_probe(streamed, probe(DropOption(0.5, 3.0, 0.5)))
    assert weak.drop_cold_frac == 0.0 and "off" in weak.notes[0]
    blind = with_probe(streamed, probe(DropOption(0.5, 40.0, math.nan)))
    assert blind.drop_cold_frac == 0.0  # no router weights recorded: not judged
