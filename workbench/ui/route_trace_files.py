"""Where the window saves route traces: `<data dir>/route-traces/`, one file per save, named by
the time and the turn so that two saves never overwrite each other."""

from __future__ import annotations

import time
from pathlib import Path

from workbench.moe.route_trace import RouteTrace, write_trace


def save_trace(data_dir: Path, trace: RouteTrace) -> Path:
    """Write `trace` (whole or not at all); runs on a worker thread. OSError says why not."""
    folder = data_dir / "route-traces"
    folder.mkdir(parents=True, exist_ok=True)  # the data directory is ours to organise
    turn = trace.loads[-1].turn if trace.loads else 0
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-turn{turn}"
    path = folder / f"{stem}.csv"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.csv"
    return write_trace(path, trace)
