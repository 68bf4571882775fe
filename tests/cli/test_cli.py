"""The CLI end to end, as a user runs it: a real subprocess on real models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workbench.engine.metrics_reader import read_metrics_csv
from workbench.engine.turn_settings import RECORDED_PER_TURN


def _cli(*args: str, stdin: str | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], input=stdin, capture_output=True, text=True,
        timeout=timeout,
    )


def test_chat_one_shot_writes_metrics_and_a_perf_summary(embedded_model_path, tmp_path):
    csv_path = tmp_path / "run.csv"
    proc = _cli("chat", "-m", str(embedded_model_path), "-p", "Say hello.", "-n", "12",
                "-t", "2", "--csv", str(csv_path), "--progress")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert "generation:" in proc.stderr and "tok/s" in proc.stderr and "TTFT" in proc.stderr
    assert "CPU occupancy" in proc.stderr
    progress = [ln for ln in proc.stderr.splitlines() if ln.startswith("PROGRESS ")]
    metrics = read_metrics_csv(csv_path)
    assert len(metrics.rows) == len(progress) > 0
    assert len(metrics.summaries) == 1
    # The turn's own settings, on their own line beside its summary (docs/telemetry.md).
    (turn,) = metrics.turn_settings
    assert set(turn) == set(RECORDED_PER_TURN) and turn["n_predict"] == 12


def test_chat_interactive_two_turns_then_eof(embedded_model_path):
    proc = _cli("chat", "-m", str(embedded_model_path), "-n", "8", "-t", "2",
                stdin="Hello there.\n/new\nWhat is two plus two?\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("generation:") == 2
    assert "(new chat)" in proc.stderr


def test_chat_reports_a_bad_model_file_without_a_traceback(tmp_path):
    bogus = tmp_path / "notes.gguf"
    bogus.write_text("this is not a model")
    proc = _cli("chat", "-m", str(bogus), "-p", "hi")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error:") and "Traceback" not in proc.stderr


def test_chat_refuses_impossible_settings(tmp_path):
    proc = _cli("chat", "-p", "hi", "-n", "0")
    assert proc.returncode == 1 and "error:" in proc.stderr and "Traceback" not in proc.stderr


def test_make_model_then_inspect(tmp_path: Path):
    out = tmp_path / "tiny.gguf"
    made = _cli("make-model", "--arch", "qwen3moe", "--size", "tiny", "-o", str(out))
    assert made.returncode == 0, made.stderr
    assert out.exists() and out.stat().st_size > 1 << 20
    info = _cli("inspect", str(out))
    assert info.returncode == 0, info.stderr
    assert "qwen3moe" in info.stdout and "expert" in info.stdout.lower()


def test_inspect_embedded_model(embedded_model_path):
    info = _cli("inspect", str(embedded_model_path))
    assert info.returncode == 0, info.stderr
    assert "gemma3" in info.stdout


def test_ctrl_c_stops_the_answer_not_the_program(embedded_model_path):
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "chat", "-m", str(embedded_model_path), "-t", "2",
         "-n", "3000", "-p", "Tell me a very long story."],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    proc.stdout.read(20)  # the answer is streaming
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "[stopped]" in out and "[stopping]" in err
    assert "stop: stopped" in err and "Traceback" not in err


def test_wild_numbers_are_refused_before_native_code(embedded_model_path):
    # Issue 12, case 2: -t 100000 aborted the process (std::bad_alloc, exit 134).
    for flag, value in (("-t", "100000"), ("-c", "4294967312")):
        proc = _cli("chat", "-m", str(embedded_model_path), "-p", "Hi", "-n", "4", flag, value)
        assert proc.returncode == 1, proc.stderr
        assert "it must be from" in proc.stderr and "Traceback" not in proc.stderr


def test_bench_kv_prints_its_ratios(embedded_model_path):
    proc = _cli("bench", "kv", "-m", str(embedded_model_path), "--repeats", "1",
                "--history-tokens", "120", "-t", "2")
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("kv ratio memory=") and " disk=" in last
    assert "(memory)" in proc.stderr and "(disk)" in proc.stderr and "(fresh)" in proc.stderr
