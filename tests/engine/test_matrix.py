"""The bench matrix: presets and schedule on their own, then real runs on the embedded model
(in process, and through the command with a fresh process per run), and the page-cache drop."""

from __future__ import annotations

import ctypes
import json
import math
import mmap
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.bench.arms import DEFAULT_PROMPTS, ArmError, read_prompts
from workbench.bench.matrix import MatrixPlan, default_base, drop_page_cache, run_matrix
from workbench.config import Config
from workbench.engine.metrics_reader import read_metrics_csv
from workbench.presets import Preset, PresetError, load_preset_file, parse_preset

PROMPT = "The lighthouse keeper opened the old map and"


# ---- presets, prompts, schedule ----------------------------------------------------------------
# (How presets are written and parsed: tests/unit/test_presets.py.)


def test_preset_file_and_validation_before_anything_runs(tmp_path):
    path = tmp_path / "presets.json"
    path.write_text(json.dumps({"one": {"n_threads": 1}, "zero": {"n_threads": 0}}))
    presets = load_preset_file(path)
    assert [p.name for p in presets] == ["one", "zero"]
    plan = MatrixPlan(presets, [PROMPT], tmp_path / "out")
    with pytest.raises(PresetError, match="preset 'zero': n_threads is 0"):
        run_matrix(plan)
    assert not (tmp_path / "out").exists()  # refused before the first run
    twice = MatrixPlan([Preset("a"), Preset("a")], [PROMPT], tmp_path / "out")
    with pytest.raises(ArmError, match="given more than once"):
        twice.configs()
    unsafe = MatrixPlan([parse_preset("a b=n_threads=2")], [PROMPT], tmp_path / "out")
    with pytest.raises(ArmError, match="preset name 'a b'"):  # it would name the run files
        unsafe.configs()


def test_default_prompt_set_and_prompt_files(tmp_path):
    assert len(read_prompts(DEFAULT_PROMPTS)) >= 3
    path = tmp_path / "p.txt"
    path.write_text("# comment\n\nfirst prompt\n  second prompt  \n")
    assert read_prompts(path) == ["first prompt", "second prompt"]
    path.write_text("# only a comment\n")
    with pytest.raises(ArmError, match="no prompts"):
        read_prompts(path)


def _order(plan: MatrixPlan) -> list[tuple[str, int]]:
    return [(run.arm, run.repeat) for run in plan.schedule()]


def test_schedules_interleave_the_arms(tmp_path):
    presets = [Preset("a"), Preset("b"), Preset("c")]
    plan = MatrixPlan(presets, [PROMPT], tmp_path, repeats=2)
    assert _order(plan) == [("a", 0), ("b", 0), ("c", 0),
                            ("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2)]
    plan.order, plan.warmup = "abba", False
    assert _order(plan) == [("a", 1), ("b", 1), ("c", 1), ("c", 2), ("b", 2), ("a", 2)]
    plan.order, plan.repeats = "shuffle", 6
    shuffled = _order(plan)
    assert shuffled == _order(plan)  # seeded
    rounds = [shuffled[i:i + 3] for i in range(0, 18, 3)]
    assert all(sorted(a for a, _ in r) == ["a", "b", "c"] for r in rounds)  # each arm once
    assert len({tuple(a for a, _ in r) for r in rounds}) > 1  # but not always in one order
    assert plan.schedule()[0].path == tmp_path / f"{shuffled[0][0]}-r1.csv"
    plan.order = "zigzag"
    with pytest.raises(ArmError, match="abab, abba, shuffle"):
        plan.configs()


# ---- real runs on the embedded model -----------------------------------------------------------


def test_a_matrix_of_two_presets_end_to_end(embedded_model_path, tmp_path):
    base = default_base().replace(model=str(embedded_model_path), n_predict=16)
    plan = MatrixPlan([parse_preset("t1=n_threads=1"), parse_preset("t2=n_threads=2")],
                      [PROMPT], tmp_path / "m", base=base, repeats=1)
    seen: list[tuple[int, int, str, int]] = []
    result = run_matrix(plan, progress=lambda *args: seen.append(args))
    assert seen == [(1, 4, "t1", 0), (2, 4, "t2", 0), (3, 4, "t1", 1), (4, 4, "t2", 1)]
    assert [(r.arm, r.repeat) for r in result.warmups] == [("t1", 0), ("t2", 0)]
    for record, threads in zip(result.runs, (1, 2), strict=True):
        assert record.path == tmp_path / "m" / f"t{threads}-r1.csv"
        metrics = read_metrics_csv(record.path)
        assert metrics.settings["n_threads"] == threads
        assert metrics.settings["temp"] == 0.0 and metrics.settings["chat_template"] is False
        assert len(metrics.summaries) == 1
        assert len(metrics.rows) == metrics.summaries[0]["tokens"] == record.n_generated == 16
    assert (tmp_path / "m" / "warmup" / "t1.csv").exists()
    table = result.table
    assert [a.label for a in table.arms] == ["t1", "t2"]
    assert [(d.key, d.values) for d in table.config_diff] == [("n_threads", ("1", "2"))]
    assert table.cell("tok_s", 1).ratio.estimate > 0
    assert table.cell("read_mib", 0).value is None  # not streaming: unmeasured, not 0
    assert (tmp_path / "m" / "compare.txt").read_text() == result.text
    assert "t2/t1" in result.text
    manifest = json.loads((tmp_path / "m" / "matrix.json").read_text())
    assert manifest["presets"] == {"t1": {"n_threads": 1}, "t2": {"n_threads": 2}}
    assert [r["path"] for r in manifest["runs"]] == ["t1-r1.csv", "t2-r1.csv"]


def test_the_matrix_command_with_a_fresh_process_per_run(embedded_model_path, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPT + "\n")
    presets = tmp_path / "presets.json"
    presets.write_text(json.dumps({"b": {"n_threads": 2}}))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "bench", "matrix", "--preset", "a=n_threads=1",
         "--preset-file", str(presets), "--prompts", str(prompts), "--repeats", "1",
         "--no-warmup", "--fresh-process", "--cold", "-n", "8", "-m", str(embedded_model_path),
         "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "run 2/2: b repeat 1/1: 8 tokens" in proc.stderr
    assert proc.stdout.startswith("Compare: 2 arms")
    assert proc.stdout == (out / "compare.txt").read_text()
    for name, threads in (("a", 1), ("b", 2)):
        metrics = read_metrics_csv(out / f"{name}-r1.csv")
        assert metrics.settings["n_threads"] == threads and len(metrics.rows) == 8
    assert not (out / "warmup").exists()


def test_the_matrix_command_refuses_a_bad_preset_without_a_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "bench", "matrix", "--preset", "a=n_ctx=8",
         "-o", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: preset 'a': n_ctx is 8")
    assert "Traceback" not in proc.stderr


# ---- the cold page cache -----------------------------------------------------------------------


def _resident_fraction(path: Path) -> float:
    """mincore(2) over a fresh read-only mapping: the share of the file's pages in the cache."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    with path.open("rb") as f:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            assert libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
        finally:
            libc.munmap(addr, size)
    return sum(v & 1 for v in vec) / pages


def test_cold_drops_the_model_file_from_the_page_cache(tiny_moe_path):
    tiny_moe_path.read_bytes()  # now cached
    assert _resident_fraction(tiny_moe_path) > 0.9
    drop_page_cache(tiny_moe_path)
    assert _resident_fraction(tiny_moe_path) < 0.1


def test_default_base_is_greedy_raw_text_of_256_tokens():
    assert default_base() == Config(n_predict=256, temp=0.0, chat_template=False)


def test_the_matrix_command_refuses_an_output_directory_whose_parent_is_missing(tmp_path):
    """Issue 12, case 11 (a sibling): the matrix created any missing parents of -o (as root,
    anywhere). It creates the directory it was given, and refuses a missing parent."""
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "bench", "matrix", "--preset", "a=n_threads=1",
         "-o", str(tmp_path / "typo" / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: the directory") and "create it first" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


# ---- --score: speed beside quality, and the Pareto front ---------------------------------------


def test_the_pareto_front_keeps_only_undominated_arms():
    from workbench.bench.matrix_quality import pareto_front

    points = {"lossless": (10.0, 0.0), "fast": (20.0, 0.5), "worse": (15.0, 0.6),
              "tie": (20.0, 0.5), "unmeasured": (math.nan, 0.1), "best_kl_slow": (5.0, 0.0)}
    # "worse" is slower and further than "fast"; "best_kl_slow" has lossless's KL, slower.
    assert pareto_front(points) == {"lossless", "fast", "tie"}
    assert pareto_front({}) == set()


def test_the_matrix_scores_its_arms_and_marks_the_front(tiny_moe_path, tmp_path, capsys):
    from workbench.cli.main import main

    out = tmp_path / "m"
    prompts = tmp_path / "p.txt"
    prompts.write_text(PROMPT + "\n")
    text = tmp_path / "t.txt"
    text.write_text("two white flashes, then dark; two white flashes, then dark; two white")
    rc = main(["bench", "matrix", "-m", str(tiny_moe_path), "--no-chat-template", "-c", "256",
               "-t", "1", "-n", "8", "--moe-stream", "--cache-mb", "2", "--no-o-direct",
               "--preset", "full=n_expert_used=0", "--preset", "k1=n_expert_used=1",
               "--repeats", "1", "--no-warmup", "--prompts", str(prompts), "-o", str(out),
               "--score", "--score-text", str(text), "--score-tokens", "24"])
    assert rc == 0, capsys.readouterr().err
    stdout = capsys.readouterr().out
    assert "Speed and quality" in stdout and "Pareto front" in stdout
    arms = json.loads((out / "quality.json").read_text())["arms"]
    assert arms["full"]["quality"]["kl_mean"][0] == 0.0  # lossless: exactly 0
    assert arms["k1"]["quality"]["kl_mean"][0] > 0
    assert arms["full"]["pareto"]  # nothing is closer than lossless
    assert arms["full"]["n_scored"] == arms["k1"]["n_scored"] == 24
    assert all(a["tok_s"][0] > 0 for a in arms.values())
    # The front is k1 too exactly when it is faster: it cannot be closer.
    assert arms["k1"]["pareto"] == (arms["k1"]["tok_s"][0] > arms["full"]["tok_s"][0])
    svg = (out / "pareto.svg").read_text()
    assert svg.startswith("<svg") and "full (front)" in svg
    assert (out / "quality.txt").read_text() in stdout
