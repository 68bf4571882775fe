"""`chat --route-trace` then `replay` (with `--plot`), as a user runs them: real subprocesses on
the tiny synthetic MoE, and the replay's table checked against the chat's own cache line."""

from __future__ import annotations

import re
import subprocess
import sys

from workbench.moe.route_trace import read_trace


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, timeout=300)


def test_a_recorded_chat_replays_to_the_engines_hit_rate_and_plots(tiny_moe_path, tmp_path):
    trace, png = tmp_path / "routes.csv", tmp_path / "curves.png"
    chat = _cli("chat", "-m", str(tiny_moe_path), "--moe-stream", "--cache-mb", "2",
                "--no-chat-template", "-n", "16", "-t", "2", "-p", "Tell me a story.",
                "--route-trace", str(trace))
    assert chat.returncode == 0, chat.stderr
    assert f"wrote the route trace {trace}" in chat.stderr
    engine_hit = float(re.search(r"moe-cache: ([0-9.]+)% hit", chat.stderr).group(1))
    assert read_trace(trace).meta.cache_budget_bytes == 2 << 20
    out = _cli("replay", str(trace), "--cache-mb", "2,4", "--plot", str(png))
    assert out.returncode == 0, out.stderr
    row = re.search(r"^\s+2\.0\s+([0-9.]+)\s+([0-9.]+)", out.stdout, re.M)
    assert row is not None, out.stdout
    lru, belady = float(row.group(1)), float(row.group(2))
    assert abs(lru - engine_hit) <= 0.1 and belady >= lru
    assert "no router weights" not in out.stdout and "drop 0.75" in out.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_inputs_get_a_message_not_a_traceback(tiny_moe_path, tmp_path):
    junk = tmp_path / "junk.csv"
    junk.write_text("turn,phase\n1,2\n")
    for args, message in [
        (("replay", str(junk)), "line 1: not a route trace"),
        (("replay", str(tmp_path / "missing.csv")), "does not exist"),
        (("replay", str(junk), "--cache-mb", "lots"), "not a number of MiB"),
        (("replay", str(junk), "--plot", str(tmp_path / "no-dir" / "c.png")), "does not exist"),
        (("chat", "-m", str(tiny_moe_path), "-p", "hi", "--route-trace", str(tmp_path / "x")),
         "needs --moe-stream"),
        (("chat", "-m", str(tiny_moe_path), "--moe-stream", "-p", "hi", "--route-trace",
          str(tmp_path / "no-dir" / "x.csv")), "does not exist"),
    ]:
        proc = _cli(*args)
        assert proc.returncode != 0
        assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_trace_with_score_rows_predicts_the_engines_substitution(tiny_moe_path, tmp_path):
    """`chat --route-scores` writes each token's score row into the trace; `replay --substitute`
    at the chat's own margin and budget then makes the engine's substitutions exactly (the
    engine prints its counter), and a trace without the rows is refused with the flag to use."""
    scored, plain = tmp_path / "scored.csv", tmp_path / "plain.csv"
    common = ("chat", "-m", str(tiny_moe_path), "--moe-stream", "--cache-mb", "2",
              "--no-chat-template", "-n", "16", "-t", "2", "-p", "Tell me a story.")
    chat = _cli(*common, "--expert-substitute", "1.0", "--route-trace", str(scored),
                "--route-scores")
    assert chat.returncode == 0, chat.stderr
    engine = int(re.search(r"(\d+) substituted", chat.stderr).group(1))
    assert engine > 0, chat.stderr
    out = _cli("replay", str(scored), "--cache-mb", "2", "--substitute", "1")
    assert out.returncode == 0, out.stderr
    row = re.search(r"^\s+2\.0\s+1\.00\s+\S+\s+\S+\s+(\d+)", out.stdout, re.M)
    assert row is not None, out.stdout
    assert int(row.group(1)) == engine
    assert _cli(*common, "--route-trace", str(plain)).returncode == 0
    refused = _cli("replay", str(plain), "--substitute", "0.2")
    assert refused.returncode == 1 and "--route-scores" in refused.stderr, refused.stderr
    for bad in ("0", "1.5", "nan", "x"):
        proc = _cli("replay", str(plain), "--substitute", bad)
        assert proc.returncode == 1 and "--substitute" in proc.stderr, proc.stderr
    lonely = _cli(*common, "--route-scores")
    assert lonely.returncode == 2 and "--route-trace" in lonely.stderr
