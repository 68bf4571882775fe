"""`explain` and `advise` as a user runs them: real files, real models, bad input refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli.main import main

UPSTREAM = str(Path(__file__).resolve().parents[3] / "shared/fixtures/upstream"
            / "bmoe-v1-desktop-qwen36.csv")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_an_upstream_file(capsys):
    code, out, _ = cli(capsys, "explain", UPSTREAM)
    assert code == 0
    assert "turn 0: 256 tokens, median 199.7 ms; 3 slow (≥ 399.5 ms)" in out
    assert "token 2: 489 ms (2.4× median), 253 MiB of experts read from disk, waited 325 ms " \
           "on expert reads" in out
    code, out, _ = cli(capsys, "explain", UPSTREAM, "--json", "--factor", "1.5")
    doc = json.loads(out)
    assert doc["factor"] == 1.5 and len(doc["turns"][0]["slow"]) == 18


def test_explain_counts_experts_with_the_model(capsys, tmp_path, tiny_moe_path):
    csv = tmp_path / "run.csv"
    proc = subprocess.run([sys.executable, "-m", "workbench", "chat", "-m", str(tiny_moe_path),
                           "-p", "Hello", "-n", "16", "-t", "1", "--moe-stream", "--cache-mb",
                           "1", "--csv", str(csv)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    code, out, _ = cli(capsys, "explain", str(csv), "--limit", "0", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["turns"][0]["n_tokens"] == 16
    # The file names its model, so reads are counted in experts (192 KiB each, tiny).
    from workbench.bench.stall_report import model_expert_bytes
    from workbench.engine.metrics_reader import read_metrics_csv

    assert model_expert_bytes(read_metrics_csv(csv)) == 3 * 128 * 128 * 4
    for token in doc["turns"][0]["slow"]:
        for cause in token["causes"]:
            if cause["key"] == "reads":
                assert cause["figures"]["experts"] >= 1
                assert "read from disk (" in cause["text"]


@pytest.mark.parametrize(("args", "code", "message"), [
    (["explain", "/nonexistent.csv"], 1, "No such file"),
    (["explain", UPSTREAM, "--factor", "1"], 2, "--factor must be a number above 1"),
    (["explain", UPSTREAM, "--factor", "nan"], 2, "--factor must be a number above 1"),
    (["explain", UPSTREAM, "--factor", "inf"], 2, "--factor must be a number above 1"),
    (["explain", UPSTREAM, "--limit", "-1"], 2, "--limit must be 0"),
    (["explain", UPSTREAM, "--model", "/nonexistent.gguf"], 1, "--model"),
])
def test_explain_bad_input(capsys, args, code, message):
    got, out, err = cli(capsys, *args)
    assert got == code and out == "" and message in err, err


def test_explain_a_file_that_is_not_metrics(capsys, tmp_path):
    bad = tmp_path / "notes.csv"
    bad.write_text("name,age\nann,3\n")
    code, _, err = cli(capsys, "explain", str(bad))
    assert code == 1 and "not a metrics file" in err
    empty = tmp_path / "empty.csv"
    empty.write_text("step,wall_ms\n")
    code, _, err = cli(capsys, "explain", str(empty))
    assert code == 1 and "has no token rows" in err


def test_advise_a_model_that_fits(capsys, tiny_moe_path):
    code, out, _ = cli(capsys, "advise", str(tiny_moe_path))
    assert code == 0
    assert "verdict: fits" in out and "stream experts: no" in out
    assert "flags: --no-moe-stream -t" in out


def test_advise_streams_when_memory_is_short_with_the_probe(capsys, tiny_moe_path):
    # 8 MiB of KV at the default context, 1.5 GiB kept free, 7 MiB of weights: 1551 MiB needed
    # whole; with 1549 available the dense part fits and ~4 MiB is left for the cache.
    code, out, err = cli(capsys, "advise", str(tiny_moe_path), "--memory-mib", "1549",
                         "--tokens", "12", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"] == "stream"
    assert doc["settings"]["moe_stream"] is True and doc["settings"]["cache_mb"] >= 1
    probe = doc["probe"]
    assert probe["tokens"] >= 11  # the first decode token included or not by the replay
    assert 0 <= probe["lru_hit_pct"] <= probe["belady_hit_pct"] <= 100
    assert probe["mib_per_token"] >= 0
    assert "probing routing" in err


def test_advise_a_dense_model_that_does_not_fit(capsys, embedded_model_path):
    code, out, _ = cli(capsys, "advise", str(embedded_model_path), "--memory-mib", "600")
    assert code == 0
    assert "verdict: does not fit" in out and "not a Mixture-of-Experts model" in out


@pytest.mark.parametrize(("args", "code", "message"), [
    (["advise", "/nonexistent.gguf"], 1, "error: "),
    (["advise", UPSTREAM], 1, "error: "),  # not a GGUF file
    (["advise", "MODEL", "--tokens", "0"], 2, "--tokens must be 1 to 4096"),
    (["advise", "MODEL", "--memory-mib", "-5"], 2, "--memory-mib must be a positive"),
    (["advise", "MODEL", "--ctx", "1"], 2, "--ctx must be at least"),
])
def test_advise_bad_input(capsys, tiny_moe_path, args, code, message):
    args = [str(tiny_moe_path) if a == "MODEL" else a for a in args]
    got, out, err = cli(capsys, *args)
    assert got == code and out == "" and message in err, err


def test_advise_help_reads_well(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["advise", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "routing probe" in out and "--memory-mib M" in out and "--no-probe" in out
