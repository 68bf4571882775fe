"""Real routing and newer files as input: the upstream engine's route trace (`# route_trace v1`)
through `replay`, the cache-sizing curves and the reader, and a newer `bmoe_metrics v2` file
(keys inserted mid-line and appended) through `explain` and `compare`.

The route trace is real: a 128-token generation of Qwen3-30B-A3B recorded by the upstream engine
at a 4000 MiB cache (../shared/fixtures/upstream/README.md)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from tests.unit.test_replay import assert_same_loads
from workbench.bench.compare import RunFigures, compare
from workbench.bench.stall_report import explain_file, format_report
from workbench.cli.main import main
from workbench.engine.metrics_reader import parse_metrics, read_metrics_csv
from workbench.moe.cache_sizing import compute_curves
from workbench.moe.replay import MIB, lookups, recorded_hit_pct, replay_lru
from workbench.moe.route_trace import RouteTraceError, read_trace
from workbench.moe.routes import Phase

UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "upstream"
ROUTE_TRACE = UPSTREAM / "qwen3-30b.route.csv"
V1_METRICS = UPSTREAM / "bmoe-v1-desktop-qwen36.csv"


@pytest.fixture(scope="module")
def real_trace():
    assert ROUTE_TRACE.exists(), f"{ROUTE_TRACE} is missing: shared/ must sit beside the repo"
    return read_trace(ROUTE_TRACE)


# ---- the route trace ---------------------------------------------------------------------------


def test_the_upstream_trace_reads_as_it_is(real_trace):
    meta = real_trace.meta
    assert (meta.arch, meta.n_layer, meta.n_expert, meta.n_expert_used) == (
        "qwen3moe", 48, 128, 6)
    assert not meta.budget_recorded and meta.cache_budget_bytes == -1
    assert len(meta.expert_bytes) == 48 and meta.expert_bytes[6] == 2654208  # dense_bytes skipped
    decode = [t.load for t in real_trace.loads if t.load.phase is Phase.DECODE]
    assert len(decode) == 48 * 128  # one load per layer per generated token
    assert all(ld.experts.shape == (1, 6) for ld in decode)
    assert not any(ld.dropped.any() for ld in decode)  # upstream writes no dropped column
    assert not np.isnan(decode[0].weights).any()


def test_its_lru_replay_equals_the_residency_the_engine_recorded(real_trace):
    loads = [(t.turn, t.load) for t in real_trace.loads]
    recorded = recorded_hit_pct(loads)
    lru = replay_lru(lookups(loads), real_trace.meta.expert_bytes, 4000 * MIB)
    assert round(recorded, 1) == round(lru.hit_pct, 1) == 74.9
    # 3 hits apart in 39,526 lookups (4 loads of 6,192 differ by a hit or two).
    assert abs(lru.hits - round(recorded * lru.lookups / 100)) <= 3
    # Budgets a few experts off the engine's do not agree this well: the test can fail.
    smaller = replay_lru(lookups(loads), real_trace.meta.expert_bytes, 4000 * MIB - 4 * 3059712)
    assert round(smaller.hit_pct, 1) != round(recorded, 1)


def test_preamble_lines_keys_and_columns_read_by_name_in_any_order(real_trace, tmp_path):
    lines = ROUTE_TRACE.read_text().splitlines()
    header_at = next(i for i, line in enumerate(lines) if line.startswith("turn,"))
    preamble = lines[1:header_at]
    rng = random.Random(7)
    shuffled = []
    for line in preamble:  # every line's keys reordered, plus a key this reader never heard of
        pairs = [*line[1:].split(), "newer_key=1"]
        rng.shuffle(pairs)
        shuffled.append("# " + " ".join(pairs))
    rng.shuffle(shuffled)
    names = [*lines[header_at].split(","), "extra"]
    order = list(range(len(names)))
    rng.shuffle(order)
    rows = [",".join([*line.split(","), "x"][j] for j in order) for line in lines[header_at + 1:]]
    path = tmp_path / "shuffled.csv"
    path.write_text("\n".join([lines[0], *shuffled, ",".join(names[j] for j in order), *rows])
                    + "\n")
    back = read_trace(path)
    assert back.meta == real_trace.meta
    assert_same_loads(real_trace, back)


def test_speculative_first_touch_reads_as_a_hit_and_a_missing_column_is_named(tmp_path):
    lines = ROUTE_TRACE.read_text().splitlines()
    header_at = next(i for i, line in enumerate(lines) if line.startswith("turn,"))
    first = lines[header_at + 1].split(",")
    first[7] = "2"  # upstream: the first touch of an entry a speculative read brought in
    path = tmp_path / "spec.csv"
    path.write_text("\n".join([*lines[:header_at + 1], ",".join(first),
                               *lines[header_at + 2:]]) + "\n")
    assert read_trace(path).loads[0].load.residency[0, 0] == 1
    path.write_text("\n".join([*lines[:header_at], lines[header_at].replace("residency",
                                                                            "resident"),
                               *lines[header_at + 1:]]) + "\n")
    with pytest.raises(RouteTraceError, match=rf"line {header_at + 1}: .*residency"):
        read_trace(path)


def test_replay_on_the_command_line(capsys):
    assert main(["replay", str(ROUTE_TRACE), "--cache-mb", "4000"]) == 0
    out = capsys.readouterr().out
    assert "recorded budget not recorded (upstream trace)" in out
    row = re.search(r"^\s+4000\.0\s+([0-9.]+)\s", out, re.M)
    assert row is not None, out
    recorded = re.search(r"the engine recorded ([0-9.]+) % hits", out)
    assert recorded is not None, out
    assert row.group(1) == recorded.group(1) == "74.9"


def test_the_cache_sizing_curves_of_real_routing(real_trace):
    loads = [(t.turn, t.load) for t in real_trace.loads]
    c = compute_curves(loads, real_trace.meta, points=4)
    assert c.tokens == 128 and c.current_mib == -1.0
    assert c.total_mib == pytest.approx(sum(real_trace.meta.expert_bytes.values()) * 128 / MIB)
    # The cliff is one token's six experts in each of 48 layers (2.5-2.9 MiB each): ~785 MiB.
    assert 6 * 48 * 2.5 < c.cliff_mib < 6 * 48 * 2.92
    assert (np.diff(c.lru_hit_pct) >= 0).all() and (c.belady_hit_pct >= c.lru_hit_pct).all()


# ---- newer metrics files -------------------------------------------------------------------------


def newer_v2(v1_text: str) -> str:
    """The v1 fixture as the upstream engine's later v2 files are written (reference 10.3):
    `cache_cycle_mb` inserted before `force_cache`, `substitute_lambda` appended, and in each
    summary `experts_reranked`/`experts_substituted` after `experts_dropped` (or the line's end)
    and the prefill and row keys appended."""
    out = []
    for line in v1_text.splitlines():
        if line == "# bmoe_metrics v1":
            line = "# bmoe_metrics v2"
        elif line.startswith("# moe_stream="):
            line = line.replace(" force_cache=", " cache_cycle_mb=950 force_cache=")
            line += " substitute_lambda=0.15"
        elif line.startswith("# summary "):
            extra = " experts_reranked=9216 experts_substituted=2488"
            if " experts_dropped=" in line:
                line = re.sub(r"( experts_dropped=\S+)", r"\1" + extra, line)
            else:
                line += extra
            line += (" prefill_cpu_s=1.5 prefill_read_mib=800.0 prefill_io_s=0.4 "
                     "prefill_stall_s=0.0 prefill_mgmt_s=0.01 prefill_dev_tokens=0 "
                     "prefill_dev_nodes=0 prefill_dev_read_mib=0.0 prefill_dev_stall_s=0.0 "
                     "row_table_MiB=0.0 row_resident_MiB=0.0 row_rows=0 row_reads=0 "
                     "row_read_MiB=0.0 row_evictions=0 row_io_errors=0")
        out.append(line)
    return "\n".join(out) + "\n"


def test_a_newer_v2_file_explains_and_compares_as_its_older_self(tmp_path):
    old_text = V1_METRICS.read_text()
    path = tmp_path / "newer.csv"
    path.write_text(newer_v2(old_text))
    new, old = read_metrics_csv(path), parse_metrics(old_text)
    assert new.format == "bmoe_metrics v2"
    assert new.preamble["cache_cycle_mb"] == "950" and new.preamble["substitute_lambda"] == "0.15"
    assert new.preamble["force_cache"] == old.preamble["force_cache"]
    (summary,) = new.summaries
    assert summary["experts_reranked"] == 9216 and summary["experts_substituted"] == 2488
    assert summary["row_io_errors"] == 0
    for key, value in old.summaries[0].items():
        assert summary[key] == value, key
    assert new.rows == old.rows
    as_text = format_report(explain_file(new), "f", 2.0)
    assert as_text == format_report(explain_file(old), "f", 2.0)
    table_new = {r.figure.key: r.cells[0].value for r in compare([RunFigures.from_csv(path)]).rows}
    table_old = {r.figure.key: r.cells[0].value
                 for r in compare([RunFigures.from_csv(V1_METRICS)]).rows}
    assert table_new == table_old


def test_explain_reads_a_newer_v2_file_on_the_command_line(capsys, tmp_path):
    path = tmp_path / "newer.csv"
    path.write_text(newer_v2(V1_METRICS.read_text()))
    assert main(["explain", str(path)]) == 0
    assert "turn 0: 256 tokens, median 199.7 ms; 3 slow" in capsys.readouterr().out


def test_the_real_routing_targets_are_what_the_real_trace_measures(real_trace):
    """`route_stats.REAL_QWEN3_30B`, the bench router's calibration target, is measured from
    the trace (decode loads), not typed in: every figure agrees to its printed precision."""
    from workbench.moe import route_stats as rs
    from workbench.moe.routes import looked_up

    decode = [t.load for t in real_trace.loads if t.load.phase is Phase.DECODE]
    meta = real_trace.meta
    measured = rs.routing_figures(looked_up(decode), np.concatenate([d.weights for d in decode]),
                                  n_expert=meta.n_expert, n_expert_used=meta.n_expert_used,
                                  n_layers=len(meta.expert_bytes))
    checks = rs.against(measured, tolerance=rs.RoutingFigures(
        lru_at_demand=(0.0006,) * 4, consecutive_overlap=0.006, top10_share=0.006,
        drift_kept=0.006, drift_share=0.006, top_slot_mean=0.0006, top_slot_p10=0.0006,
        below_075k_slots=0.0006, below_075k_mass=0.0006))
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    # The checks can fail: the figures of a router with fixed favourites are far from these.
    frozen = [(ld.layer, [0, 1, 2, 3, 4, 5]) for ld in decode]
    fixed = rs.routing_figures(frozen, np.full((len(decode), 6), 1 / 6), n_expert=128,
                               n_expert_used=6, n_layers=48)
    assert not any(c.ok for c in rs.against(fixed) if c.name.startswith(("lru", "drift")))
