"""The compare table on hand-made metrics files (ours through CsvMetricsSink, an upstream v2
snippet) and on the real upstream v1 file; then `python -m workbench compare` as a user runs it."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.bench.compare import (
    MISSING,
    RunFigures,
    compare,
    compare_arms,
    format_table,
    group_runs,
    load_runs,
)
from workbench.bench.figures import FIGURE_BY_KEY
from workbench.config import Config
from workbench.engine.metrics import ModelIdentity, RunInfo, RunSummary, TokenMetrics
from workbench.engine.metrics_reader import parse_metrics
from workbench.engine.sinks import CsvMetricsSink

UPSTREAM = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "upstream"
V1_FIXTURE = UPSTREAM / "bmoe-v1-desktop-qwen36.csv"


def write_ours(
    path: Path,
    turns: list[list[float]],
    *,
    ttft: float = 0.2,
    read_bytes: int = -1,
    majflt: int = 0,
    **settings: object,
) -> Path:
    """A metrics file as the engine writes it: one turn per list of decode times (ms)."""
    info = RunInfo(
        engine_version="0.1.0", llama_cpp_python_version="0.3.36",
        model=ModelIdentity(path="/m/tiny.gguf", name="tiny", size_bytes=1000, fast_hash="ab"),
        arch="gemma3", n_layer=4, n_expert=0, n_expert_used=0, n_vocab=100, n_ctx_train=512,
        chat_template=False, settings=Config().replace(**settings).to_dict(),
    )
    with CsvMetricsSink(path) as sink:
        sink.on_run_info(info)
        for t, walls in enumerate(turns):
            for step, wall in enumerate(walls, start=1):
                sink.on_token(TokenMetrics(
                    step=step, steps=len(walls), turn=t, wall_ms=wall, cpu_ms=wall,
                    majflt=majflt, majflt_mib=0.0, loop_overhead_ms=0.5, read_bytes=read_bytes,
                    compute_ms=wall, token_id=7, piece="x"))
            sink.on_summary(RunSummary(
                turn=t, n_generated=len(walls), gen_seconds=sum(walls) / 1e3, n_prompt=5,
                n_reused=0, n_past=5 + len(walls), n_ctx=512, load_seconds=1.0,
                prefill_seconds=0.1, ttft_seconds=ttft + t, majflt_per_token=majflt,
                cpu_s_per_token=0.01, loop_overhead_s_per_token=0.0005, stop_reason="length"))
    return path


def noisy(n: int, level: float, seed: int) -> list[float]:
    return list(level * np.exp(np.random.default_rng(seed).normal(0, 0.05, size=n)))


# ---- one run -----------------------------------------------------------------------------------


def test_figures_of_one_of_our_runs(tmp_path):
    walls = [[10.0, 20.0, 30.0, 40.0] * 10, [10.0] * 40]
    run = RunFigures.from_csv(write_ours(tmp_path / "a.csv", walls, ttft=0.25), trim=0)
    assert run.n_tokens == 80
    table = compare([run])
    value = {row.figure.key: row.cells[0].value for row in table.rows}
    assert value["tok_s"].estimate == pytest.approx(80 / (1000 / 1e3 + 400 / 1e3))
    assert value["median_ms"].estimate == pytest.approx(10.0)
    assert value["p99_ms"].estimate == pytest.approx(40.0)
    assert value["ttft_s"].estimate == pytest.approx((0.25 + 1.25) / 2)  # mean over turns
    assert value["faults"].estimate == 0.0  # measured zero stays a zero...
    assert value["read_mib"] is None  # ...unmeasured (-1) is missing, not 0
    assert value["hit_pct"] is None
    tok_s = value["tok_s"]
    assert tok_s.low < tok_s.estimate < tok_s.high


def test_warm_up_trim_drops_the_first_tokens_of_every_turn(tmp_path):
    walls = [[500.0, 400.0] + [10.0] * 30, [300.0, 300.0] + [10.0] * 30]
    path = write_ours(tmp_path / "a.csv", walls)
    raw, trimmed = RunFigures.from_csv(path), RunFigures.from_csv(path, trim=2)
    assert (raw.n_tokens, trimmed.n_tokens) == (64, 60)
    assert trimmed.estimate(FIGURE_BY_KEY["tok_s"]) == pytest.approx(100.0)
    assert raw.estimate(FIGURE_BY_KEY["tok_s"]) < 40
    assert "first 2 tokens of every turn" in format_table(compare([trimmed]))


# ---- several arms ------------------------------------------------------------------------------


def test_two_configurations_give_two_arms_with_ratio_and_config_difference(tmp_path):
    a = write_ours(tmp_path / "slow.csv", [noisy(200, 40.0, 1)], n_threads=1)
    b = write_ours(tmp_path / "fast.csv", [noisy(200, 20.0, 2)], n_threads=2)
    table = compare(load_runs([a, b]))
    assert [arm.label for arm in table.arms] == ["A", "B"]
    ratio = table.cell("tok_s", 1).ratio
    assert ratio.estimate == pytest.approx(2.0, rel=0.03)
    assert ratio.excludes(1.0) and not ratio.excludes(ratio.estimate)
    assert table.cell("median_ms", 1).ratio.estimate == pytest.approx(0.5, rel=0.03)
    assert table.cell("tok_s", 0).ratio is None  # the base has no ratio
    assert table.cell("read_mib", 1).ratio is None  # missing in both: no ratio
    assert [(d.key, d.values) for d in table.config_diff] == [("n_threads", ("1", "2"))]
    assert "independent bootstraps" in " ".join(table.methods)


def test_runs_with_one_configuration_are_repeats_of_one_arm(tmp_path):
    paths = [write_ours(tmp_path / f"{arm}{i}.csv", [noisy(64, level, 10 * i + k)],
                        n_threads=threads)
             for i in range(3) for k, (arm, level, threads) in enumerate(
                 [("a", 30.0, 1), ("b", 15.0, 2)])]
    runs = load_runs(paths)
    arms = group_runs(runs)
    assert [(arm.label, len(arm.runs)) for arm in arms] == [("A", 3), ("B", 3)]
    assert [Path(r.source).name for r in arms[1].runs] == ["b0.csv", "b1.csv", "b2.csv"]
    table = compare(runs, min_repeats=3)  # three repeats: paired bootstrap across them
    assert any("paired bootstrap across 3 repeats" in m for m in table.methods)
    pooled = sum(r.n_tokens for r in arms[1].runs) / sum(
        r.series["wall_ms"].sum() / 1e3 for r in arms[1].runs)
    assert table.cell("tok_s", 1).value.estimate == pytest.approx(pooled)
    ungrouped = compare(runs, group=False)
    assert len(ungrouped.arms) == 6 and ungrouped.config_diff[0].key == "n_threads"


def test_pairing_cancels_a_machine_state_shared_by_both_arms(tmp_path):
    # Repeat i ran on a machine i-times slower or faster for both arms; B is exactly twice as
    # fast within every repeat. Paired, the ratio is exactly 2; unpaired it is much less certain.
    state = [1.0, 1.6, 0.7, 1.3, 0.9]
    arms_runs: dict[str, list[RunFigures]] = {"A": [], "B": []}
    for i, s in enumerate(state):
        base = noisy(64, 30.0 * s, i)
        for label, scale, threads in (("A", 1.0, 1), ("B", 0.5, 2)):
            path = write_ours(tmp_path / f"{label}{i}.csv", [[w * scale for w in base]],
                              n_threads=threads)
            arms_runs[label].append(RunFigures.from_csv(path))
    arms = group_runs(arms_runs["A"] + arms_runs["B"])
    paired = compare_arms(arms).cell("tok_s", 1).ratio
    # (to the CSV's 3 decimals)
    assert (paired.estimate, paired.low, paired.high) == pytest.approx((2.0, 2.0, 2.0), rel=1e-4)
    shuffled = group_runs(arms_runs["A"] + arms_runs["B"][::-1])  # pairs broken
    unpaired = compare_arms(shuffled).cell("tok_s", 1).ratio
    assert unpaired.high - unpaired.low > 0.2


# ---- upstream files ----------------------------------------------------------------------------

V2_SNIPPET = """\
# bmoe_metrics v2
# engine=1.4.0
# model=Big.gguf arch=qwen3moe n_layer=48 n_expert=128 n_expert_used=8 threads=4 n_ctx=4096
# moe_stream=1 cache_mb=4096 io_threads=4 o_direct=1 overlap=0 dense_weights=anon
# temp=0 top_k=40 top_p=0.95 seed=4294967295 spec=mtp spec_draft_max=3
step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,\
dense_resident_frac,turn,majflt_mib,cache_budget_mib,rss_mib,rss_anon_mib,rss_file_mib,swap_mib,\
mem_available_mib,mem_free_mib,swap_free_mib,loop_overhead_ms,mtp_batch,mtp_draft_ms,drain_ms,\
adopt_ms,ra_issue_ms,ra_wd_ms
{rows}
# summary tokens=6 s/tok=0.1 tok/s=10.0 read_MiB=12.0 cache_hit_pct=75.0 n_prompt=9 load_s=3.0 \
prefill_s=0.8 prefill_tps=11.25 majflt/tok=1.00 cpu_s/tok=0.3
"""


def v2_row(step: int, wall: float, read_mib: float, hit: float, batch: int) -> str:
    return (f"{step},6,{wall:.3f},1.0,1.0,{int(read_mib * (1 << 20))},{hit:.2f},0,0,1,300.0,"
            f"0.9,0,0.0,4096,5000,4000,1000,0,9000,8000,0,1.0,{batch},0,0,0,0,0")


def test_an_upstream_v2_file_reads_by_name_with_speculative_groups_spread(tmp_path):
    rows = [v2_row(1, 100.0, 2.0, 50.0, 1), v2_row(2, 200.0, 4.0, 60.0, 2),
            v2_row(3, 0.0, 0.0, 60.0, 2), v2_row(4, 100.0, 2.0, 70.0, 1),
            v2_row(5, 100.0, 2.0, 72.0, 1), v2_row(6, 100.0, 2.0, 75.0, 1)]
    path = tmp_path / "up.csv"
    path.write_text(V2_SNIPPET.format(rows="\n".join(rows)))
    run = RunFigures.from_csv(path)
    assert run.series["wall_ms"].tolist() == [100.0] * 6  # 200 ms for two tokens: 100 each
    table = compare([run])
    value = {row.figure.key: row.cells[0].value for row in table.rows}
    assert value["tok_s"].estimate == pytest.approx(10.0)
    assert value["read_mib"].estimate == pytest.approx(2.0)
    assert value["hit_pct"].estimate == pytest.approx(75.0)  # the summary's cumulative rate
    assert value["ttft_s"].estimate == pytest.approx(0.8)  # upstream: prefill_s
    assert value["faults"].estimate == pytest.approx(1.0)


def test_the_real_upstream_v1_file_matches_its_own_summary():
    run = RunFigures.from_csv(V1_FIXTURE)
    summary = parse_metrics(V1_FIXTURE.read_text()).summaries[0]
    value = {row.figure.key: row.cells[0].value for row in compare([run]).rows}
    assert run.n_tokens == summary["tokens"] == 256
    assert value["tok_s"].estimate == pytest.approx(summary["tok/s"], rel=1e-3)
    assert value["read_mib"].estimate == pytest.approx(summary["read_MiB"] / 256, rel=1e-3)
    assert value["hit_pct"].estimate == pytest.approx(summary["cache_hit_pct"])
    assert value["ttft_s"].estimate == pytest.approx(summary["prefill_s"])
    # cpu_ms is 0 on every row: that platform could not read process counters, so its zero
    # fault counts are unmeasured too, not "no faults".
    assert value["faults"] is None
    median = value["median_ms"]
    assert median.low <= median.estimate <= median.high
    assert median.estimate == pytest.approx(np.median(run.series["wall_ms"]))


def test_ours_against_upstream_compares_the_preamble_keys_both_write(tmp_path):
    ours = write_ours(tmp_path / "ours.csv", [noisy(100, 50.0, 3)], n_threads=4)
    table = compare(load_runs([ours, V1_FIXTURE]))
    diff = {d.key: d.values for d in table.config_diff}
    assert diff["arch"] == ("gemma3", "qwen35moe")
    assert diff["moe_stream"] == ("0", "1")
    assert "threads" not in diff  # 4 in both
    assert not any(key.startswith("wb_") for key in diff)
    ratio = table.cell("tok_s", 1).ratio
    assert ratio.estimate == pytest.approx(
        table.cell("tok_s", 1).value.estimate / table.cell("tok_s", 0).value.estimate)


# ---- text --------------------------------------------------------------------------------------


def test_the_text_table_is_aligned_and_shows_missing_as_a_dash(tmp_path):
    a = write_ours(tmp_path / "a.csv", [noisy(100, 40.0, 4)], n_threads=1)
    b = write_ours(tmp_path / "b.csv", [noisy(100, 20.0, 5)], n_threads=2)
    text = format_table(compare(load_runs([a, b])))
    lines = text.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("figure"))
    grid = lines[header:header + 9]
    column = grid[0].index("B/A")
    assert all(len(ln) > column and ln[column - 2:column] == "  " for ln in grid[1:])
    read = next(ln for ln in grid if ln.startswith("read"))
    assert read.split()[2:] == [MISSING] * 3 and " 0 " not in read
    assert "decode rate" in text and "×2" in text and " *" in text
    assert "n_threads" in text.split("configuration difference:")[1]
    assert "a.csv" in text and "b.csv" in text


def test_one_arm_and_no_difference_still_reads_well(tmp_path):
    a = write_ours(tmp_path / "a.csv", [noisy(50, 40.0, 6)])
    text = format_table(compare(load_runs([a])))
    assert "Compare: 1 arm," in text and "none (the arms ran the same configuration)" in text
    assert not math.isnan(compare(load_runs([a])).cell("p95_ms", 0).value.estimate)


# ---- the command -------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", "compare", *args],
                          capture_output=True, text=True, timeout=120)


def test_compare_command_prints_the_table(tmp_path):
    a = write_ours(tmp_path / "a.csv", [noisy(100, 40.0, 7)], n_threads=1)
    b = write_ours(tmp_path / "b.csv", [noisy(100, 20.0, 8)], n_threads=2)
    proc = _cli(str(a), str(b), "--trim", "4", "--resamples", "500")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == format_table(compare(load_runs([a, b], trim=4), resamples=500))
    assert "first 4 tokens" in proc.stdout


def test_compare_is_listed_in_the_help():
    proc = subprocess.run([sys.executable, "-m", "workbench", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "summary figures of metrics files side by side" in proc.stdout


def test_compare_command_reports_an_unreadable_file(tmp_path):
    bad = tmp_path / "notes.csv"
    bad.write_text("hello,world\n1,2\n")
    proc = _cli(str(bad))
    assert proc.returncode == 1
    assert proc.stderr.startswith("error:") and "notes.csv" in proc.stderr
    assert "Traceback" not in proc.stderr
