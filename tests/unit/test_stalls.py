"""The stall explainer's rules on synthetic rows: each cause is named from its own figure, with
its figure, and only then; unmeasured figures are never evidence."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from workbench.bench.stall_report import explain_file, format_report, report_json, split_turns
from workbench.bench.stalls import (
    MIB,
    Prefill,
    explain_answer,
    prefill_of,
)
from workbench.engine.metrics_reader import parse_metrics, read_metrics_csv

UPSTREAM = str(Path(__file__).resolve().parents[3] / "shared/fixtures/upstream"
            / "bmoe-v1-desktop-qwen36.csv")


def rows(n: int = 40, **overrides: dict[int, dict[str, float]]) -> list[dict[str, float]]:
    """n calm tokens (10 ms, 2 cores busy, steady memory), with per-index overrides."""
    out = []
    for i in range(n):
        row = {"step": i + 1, "turn": 0, "wall_ms": 10.0 + (i % 3) * 0.2, "cpu_ms": 20.0,
               "io_ms": 1.0, "read_bytes": 2 * MIB, "majflt": 0, "majflt_mib": 0.0,
               "rss_mib": 900.0, "mem_available_mib": 8000.0, "mtp_batch": 1}
        row.update(overrides.get("at", {}).get(i, {}))
        out.append(row)
    return out


def keys(e, index):
    token = next(t for t in e.slow if t.index == index)
    return [c.key for c in token.causes]


def test_calm_answer_has_no_slow_token():
    e = explain_answer(rows())
    assert e.slow == ()
    assert e.median_ms == pytest.approx(10.2)


def test_cache_misses_name_experts_and_bytes():
    r = rows(at={7: {"wall_ms": 83.0, "read_bytes": 23 * MIB, "io_ms": 60.0, "cpu_ms": 40.0}})
    e = explain_answer(r, expert_bytes=23 * MIB / 9)
    assert [t.index for t in e.slow] == [7]
    token = e.slow[0]
    assert keys(e, 7) == ["reads", "io"]
    assert token.causes[0].text == "9 experts read from disk (23 MiB)"
    assert token.causes[1].text == "waited 60 ms on expert reads"
    assert token.line(e.median_ms).startswith("token 8: 83 ms (8.1× median), 9 experts")
    # Without the expert size, the bytes alone.
    assert explain_answer(r).slow[0].causes[0].text == "23 MiB of experts read from disk"


def test_reads_like_every_other_token_are_not_a_cause():
    # Slow, but it read what every token reads: not the cause; nothing else explains it.
    r = rows(at={5: {"wall_ms": 50.0, "cpu_ms": 98.0}})
    e = explain_answer(r)
    assert keys(e, 5) == ["unexplained"]


def test_io_wait_needs_a_share_of_the_excess():
    small = rows(at={3: {"wall_ms": 60.0, "io_ms": 5.0, "cpu_ms": 110.0}})
    assert "io" not in keys(explain_answer(small), 3)
    big = rows(at={3: {"wall_ms": 60.0, "io_ms": 30.0, "cpu_ms": 55.0}})
    assert "io" in keys(explain_answer(big), 3)


def test_overlapped_reads_use_the_stall():
    r = rows(at={4: {"wall_ms": 60.0, "io_ms": 2.0, "stall_ms": 40.0, "cpu_ms": 35.0}})
    e = explain_answer(r)
    assert "io" in keys(e, 4)
    assert e.slow[0].causes[0].figures["io_ms"] == 40.0


def test_major_faults_named_with_their_count_and_floor():
    r = rows(at={9: {"wall_ms": 45.0, "majflt": 120, "majflt_mib": 0.47, "cpu_ms": 20.0}})
    e = explain_answer(r)
    assert keys(e, 9) == ["faults"]  # faults block: no contention claimed on top
    assert e.slow[0].causes[0].text == "120 major page faults (at least 0.5 MiB paged in from disk)"


def test_memory_pressure_from_rss_or_mem_available_falling():
    r = rows(at={12: {"wall_ms": 40.0, "rss_mib": 700.0, "cpu_ms": 80.0},
                 20: {"wall_ms": 40.0, "mem_available_mib": 3000.0, "cpu_ms": 80.0}})
    e = explain_answer(r)
    assert keys(e, 12) == ["memory"]
    assert e.slow[0].causes[0].text == "memory pressure: resident set fell 200 MiB"
    assert keys(e, 20) == ["memory"]
    assert "MemAvailable fell 4.9 GiB to 2.9 GiB" in e.slow[1].causes[0].text
    # A small wobble is not pressure.
    calm = rows(at={12: {"wall_ms": 40.0, "rss_mib": 890.0, "cpu_ms": 80.0}})
    assert keys(explain_answer(calm), 12) == ["unexplained"]


def test_first_token_after_a_prefill():
    r = rows(at={0: {"wall_ms": 70.0, "cpu_ms": 140.0}})
    e = explain_answer(r, prefill=Prefill(812, 1.9))
    assert keys(e, 0) == ["prefill"]
    assert e.slow[0].causes[0].text == "first token after prefilling 812 prompt tokens (1.90 s)"
    # Only the first token of the turn, and only with a prefill recorded.
    assert keys(explain_answer(r), 0) == ["unexplained"]
    later = rows(at={6: {"wall_ms": 70.0, "cpu_ms": 140.0}})
    assert keys(explain_answer(later, prefill=Prefill(812, 1.9)), 6) == ["unexplained"]


def test_verify_batch_keys_off_the_column():
    r = rows(at={15: {"wall_ms": 38.0, "mtp_batch": 4, "mtp_draft_ms": 3.0, "cpu_ms": 76.0}})
    e = explain_answer(r)
    assert keys(e, 15) == ["verify"]
    assert e.slow[0].causes[0].text == ("a verify batch: this decode confirmed 4 tokens "
                                       "(drafting took 3.0 ms)")
    for row in r:
        del row["mtp_batch"]  # a file without the column: no verify claim
    assert keys(explain_answer(r), 15) == ["unexplained"]


def test_cpu_contention_when_wall_is_far_above_cpu_time():
    r = rows(at={22: {"wall_ms": 50.0, "cpu_ms": 30.0}})  # 0.6 cores against 2
    e = explain_answer(r)
    assert keys(e, 22) == ["contention"]
    assert e.slow[0].causes[0].figures["cores"] == pytest.approx(30.0 / 49.0)
    # The time waiting on reads is not CPU the process was denied.
    waiting = rows(at={22: {"wall_ms": 50.0, "cpu_ms": 30.0, "io_ms": 35.0}})
    assert "contention" not in keys(explain_answer(waiting), 22)


def test_unmeasured_figures_are_not_evidence():
    # Upstream writes 0 CPU time and 0 RSS where it cannot measure; we write -1.
    r = rows(at={10: {"wall_ms": 50.0, "cpu_ms": 0.0, "rss_mib": 0.0}})
    for row in r:
        row["cpu_ms"] = 0.0
        row["rss_mib"] = 0.0
        row["read_bytes"] = -1
        row["io_ms"] = -1.0
    r[11]["rss_mib"] = 0.0
    assert keys(explain_answer(r), 10) == ["unexplained"]
    assert keys(explain_answer(r, threads=2), 10) == ["unexplained"]  # 0 CPU: not 0 cores
    no_wall = [{"step": 1, "wall_ms": -1.0}]
    e = explain_answer(no_wall)
    assert e.slow == () and math.isnan(e.median_ms)


def test_slow_needs_factor_and_an_absolute_margin():
    tiny = [{"step": i + 1, "wall_ms": 0.2} for i in range(20)]
    tiny[5]["wall_ms"] = 0.9  # 4.5× a 0.2 ms median, but under a millisecond above it
    assert explain_answer(tiny).slow == ()
    with pytest.raises(ValueError, match="above 1"):
        explain_answer(tiny, factor=1.0)


def test_several_causes_on_one_token_in_order():
    r = rows(at={30: {"wall_ms": 120.0, "read_bytes": 40 * MIB, "io_ms": 80.0, "majflt": 9,
                      "rss_mib": 600.0, "cpu_ms": 50.0}})
    assert keys(explain_answer(r), 30) == ["reads", "io", "faults", "memory"]


def test_worst_keeps_the_slowest_in_answer_order():
    over = {i: {"wall_ms": 30.0 + i, "cpu_ms": 60.0 + 2 * i} for i in (3, 9, 17, 25, 31, 36)}
    e = explain_answer(rows(at=over))
    assert [t.index for t in e.worst(3)] == [25, 31, 36]


def test_prefill_from_either_summary_naming():
    assert prefill_of({"n_prompt": 29, "prefill_s": 8.598}) == Prefill(29, 8.598)
    assert prefill_of({"n_prompt": 12, "prefill_seconds": 0.5}) == Prefill(12, 0.5)
    assert prefill_of({"n_prompt": 0, "prefill_s": 0.0}) is None
    assert prefill_of({}) is None


def test_file_turns_each_have_their_own_median():
    text = "step,turn,wall_ms,cpu_ms\n" + "".join(
        f"{i + 1},0,{10.0 if i != 4 else 90.0},{20 if i != 4 else 180}\n"
        for i in range(10)) + "".join(
        f"{i + 1},1,{100.0},200\n" for i in range(10))
    text += "# summary tokens=10 n_prompt=5 prefill_s=0.1 turn=0\n"
    mf = parse_metrics(text)
    assert [t for t, _ in split_turns(mf.rows)] == [0, 1]
    turns = explain_file(mf, expert_bytes=-1)
    assert [len(t.explanation.slow) for t in turns] == [1, 0]  # turn 1's 100 ms is its median
    report = format_report(turns, "f.csv", 2.0)
    assert "turn 0: 10 tokens, median 10.0 ms; 1 slow" in report
    assert "token 5: 90 ms" in report
    doc = report_json(turns, "f.csv", 2.0)
    assert doc["turns"][0]["slow"][0]["token"] == 5
    assert doc["turns"][0]["slow"][0]["causes"][0]["key"] == "unexplained"


def test_upstream_file_reads_io_and_first_token_prefill():
    turns = explain_file(read_metrics_csv(UPSTREAM), expert_bytes=-1)
    (turn,) = turns
    e = turn.explanation
    assert e.n_tokens == 256 and len(e.slow) >= 1
    # Upstream's run streams experts from disk: every slow token there read and waited.
    assert all({"reads", "io"} <= {c.key for c in t.causes} for t in e.slow)
    first = next(t for t in e.slow if t.step == 1)
    assert "prefill" in [c.key for c in first.causes]  # its summary: 29 tokens in 8.598 s
    # Its CPU times are all 0 (not measured there): never read as contention.
    assert "contention" not in e.cause_counts()


def test_mem_available_on_a_roomy_machine_is_not_pressure():
    # Others' allocations move MemAvailable by tens of MiB: not pressure with 8 GiB left...
    roomy = rows(at={12: {"wall_ms": 40.0, "mem_available_mib": 7900.0, "cpu_ms": 80.0}})
    assert keys(explain_answer(roomy), 12) == ["unexplained"]
    # ...but the same fall with little left is.
    low = rows(at={i: {"mem_available_mib": 2100.0} for i in range(12)}
               | {12: {"wall_ms": 40.0, "mem_available_mib": 2000.0, "cpu_ms": 80.0}})
    for i in range(13, 40):
        low[i]["mem_available_mib"] = 2000.0
    assert keys(explain_answer(low), 12) == ["memory"]


def test_contention_against_the_compute_threads_when_every_token_is_contended():
    # The whole answer ran at half a core (a busy machine): against its own median the slow
    # token is not contended, against its 2 threads it is.
    r = rows(at={i: {"cpu_ms": 5.0} for i in range(40)})
    r[8].update(wall_ms=25.0, cpu_ms=12.0)
    assert keys(explain_answer(r), 8) == ["unexplained"]
    e = explain_answer(r, threads=2)
    assert keys(e, 8) == ["contention"]
    assert e.slow[0].causes[0].text == ("CPU contention: 0.50 cores busy of 2 compute threads "
                                       "(CPU 12 ms in 24 ms)")


def test_rows_a_speculative_batch_confirmed_stay_out_of_the_median():
    # Upstream bills a batch's decode to its first row and 0 ms to the tokens it confirmed.
    r = rows(at={i: {"wall_ms": 0.0, "cpu_ms": 0.0} for i in range(0, 40, 2)})
    e = explain_answer(r)
    assert e.median_ms == pytest.approx(10.2) and e.slow == ()
