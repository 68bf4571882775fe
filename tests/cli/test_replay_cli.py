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
