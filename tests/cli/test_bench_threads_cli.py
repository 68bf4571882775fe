"""`bench threads` as a user runs it, on the tiny synthetic MoE: every arrangement is measured
at every count, and the count it marks chosen is the fastest it printed (the defaults must
never pick a count that measured slower than another in the same run)."""

from __future__ import annotations

import re
import subprocess
import sys


def test_bench_threads_measures_every_count_and_marks_the_fastest(tiny_moe_path):
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "bench", "threads", "-m", str(tiny_moe_path),
         "--counts", "1,2", "--cache-mb", "2", "--repeats", "1", "-n", "8"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    summaries = re.findall(r"^threads (\S+) chosen=(\d+) default=(\d+) (.*)$", proc.stdout, re.M)
    assert [s[0] for s in summaries] == ["resident", "streamed-cache-2MiB", "streamed-no-cache"]
    for name, chosen, _, rest in summaries:
        rates = {int(c): float(r) for c, r in re.findall(r"t(\d+)_tok_s=([0-9.]+)", rest)}
        assert set(rates) == {1, 2}, rest
        assert rates[int(chosen)] == max(rates.values()), (name, rates, chosen)
    # The streamed arms read experts: their io share is measured, not left at zero.
    streamed = re.findall(r"io\s+([0-9.]+) \+ compute", proc.stdout.split("streamed-no-cache:")[1])
    assert streamed and all(float(v) > 0 for v in streamed)
