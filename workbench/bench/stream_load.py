"""`bench stream --which load`: what a streamed load costs, against the dense part alone.

Three arms, each load in a fresh process (`workbench.bench.load_probe`) so its peak RSS (VmHWM)
and storage reads are its own, the model dropped from the page cache before each, RAM held by the
balloon, in rotating order:

- `dense`: every non-expert tensor read into private memory (the floor: what the dense part
  alone costs, after the same imports);
- `lean`: a streamed session opened with the lean load (the default);
- `populate`: the same with `--no-lean-load` (llama.cpp's MAP_POPULATE + WILLNEED).

Goal (issue #14): lean load time and peak RSS within 1.5x of the dense arm's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from workbench.bench.balloon import Balloon
from workbench.bench.load_probe import ARMS
from workbench.bench.matrix import drop_page_cache
from workbench.bench.stats import paired_ratio_ci
from workbench.moe.layout import read_model_facts

MIB = 1 << 20
REPO_ROOT = Path(__file__).resolve().parents[2]
Log = Callable[[str], None]


def probe_load(model: Path, arm: str, threads: int) -> dict[str, float]:
    """One cold load of `arm` in a fresh process; the probe's JSON record."""
    drop_page_cache(model)
    out = subprocess.run(
        [sys.executable, "-m", "workbench.bench.load_probe", str(model), arm,
         "--threads", str(threads)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the {arm} load probe failed: {tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def load_cost(model: Path, *, leave_mib: int, repeats: int, threads: int, log: Log) -> str:
    facts = read_model_facts(model)
    dense_bytes = facts.tensor_bytes - facts.expert_bytes
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    with Balloon(leave_mib * MIB) as balloon:
        log(f"load: balloon holds {balloon.size / MIB:.0f} MiB; file {facts.file_size / MIB:.0f} "
            f"MiB, dense part {dense_bytes / MIB:.0f} MiB, about {leave_mib} MiB left available")
        for i in range(repeats):
            for arm in ARMS[i % 3:] + ARMS[: i % 3]:  # rotating order
                runs[arm].append(probe_load(model, arm, threads))
            log(f"load {i + 1}/{repeats}: " + ", ".join(
                f"{arm} {r[-1]['load_s']:.2f} s peak {r[-1]['peak_rss_bytes'] / MIB:.0f} MiB "
                f"read {r[-1]['read_bytes'] / MIB:.0f} MiB" for arm, r in runs.items()))
    if not all(r["lean_effective"] for r in runs["lean"]):
        log("load: warning: the lean load was not in effect (see the session's load note)")

    def field(arm: str, name: str) -> list[float]:
        return [float(r[name]) for r in runs[arm]]

    def net(arm: str) -> list[float]:
        return [float(r["peak_rss_bytes"] - r["base_rss_bytes"]) for r in runs[arm]]

    parts = []
    for arm in ("lean", "populate"):
        t = paired_ratio_ci(field(arm, "load_s"), field("dense", "load_s"))
        rss = paired_ratio_ci(field(arm, "peak_rss_bytes"), field("dense", "peak_rss_bytes"))
        parts.append(
            f"{arm}/dense load_time={t.estimate:.2f} ci95=[{t.low:.2f}, {t.high:.2f}] "
            f"peak_rss={rss.estimate:.2f} ci95=[{rss.low:.2f}, {rss.high:.2f}] "
            f"net_rss={np.sum(net(arm)) / max(1.0, np.sum(net('dense'))):.2f}")
    means = " ".join(
        f"{arm}_load_s={np.mean(field(arm, 'load_s')):.2f} "
        f"{arm}_peak_mib={np.mean(field(arm, 'peak_rss_bytes')) / MIB:.0f} "
        f"{arm}_read_mib={np.mean(field(arm, 'read_bytes')) / MIB:.0f}" for arm in ARMS)
    return (f"stream load {'; '.join(parts)} (goal: lean/dense load_time and peak_rss <= 1.5) "
            f"file_mib={facts.file_size / MIB:.0f} dense_mib={dense_bytes / MIB:.0f} {means}")
