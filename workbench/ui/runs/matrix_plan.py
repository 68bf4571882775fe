"""A bench matrix from the window's presets: arm names, the base, the plan (Qt-free).

The base is the bench's own (greedy, raw text) with the open model and the dialog's tokens to
generate; each stored preset's settings override it, as presets do on the command line. A stored
preset's name may be anything, so each arm gets a copy of its preset under a file-safe name.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from workbench import paths
from workbench.bench.matrix import MatrixPlan, default_base
from workbench.config import Config
from workbench.presets import Preset

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def arm_name(name: str, taken: set[str]) -> str:
    """A preset name made safe for run file names ("fast cache" -> "fast-cache"), unique."""
    base = _UNSAFE.sub("-", name).strip("-._") or "preset"
    if not base[0].isalnum():
        base = "p" + base
    out, n = base, 2
    while out in taken:
        out, n = f"{base}-{n}", n + 1
    taken.add(out)
    return out


def matrix_base(current: Config, tokens: int) -> Config:
    return default_base().replace(model=current.model, n_predict=tokens)


def arms_from_presets(presets: Sequence[Preset]) -> list[Preset]:
    taken: set[str] = set()
    return [Preset(arm_name(p.name, taken), p.settings) for p in presets]


def default_out_dir(data: Path | None = None) -> Path:
    """Where a matrix writes its runs: under `data` (the window's data directory)."""
    return (data or paths.data_dir()) / "bench" / time.strftime("matrix-%Y%m%d-%H%M%S")


def build_plan(presets: Sequence[Preset], prompts: list[str],
               current: Config, *, tokens: int = 256, repeats: int = 5, warmup: bool = True,
               order: str = "abab", fresh_process: bool = False,
               out_dir: Path | None = None, default_out: bool = False) -> MatrixPlan:
    """The plan; `plan.configs()` (called by run_matrix first) validates every arm.

    `default_out`: `out_dir` is the default location (default_out_dir), whose missing parents
    the matrix may create; any other directory's parent must exist."""
    return MatrixPlan(arms_from_presets(presets), prompts, out_dir or default_out_dir(),
                      base=matrix_base(current, tokens), repeats=repeats, warmup=warmup,
                      order=order, fresh_process=fresh_process,
                      make_parents=out_dir is None or default_out)
