"""What the live plots show: the columns derived from each token's metrics, and the plots (Qt-free).

This is the unit boundary of the telemetry: an unmeasured engine value (-1) becomes NaN here, so
plots draw a gap, never a zero. Every column is in the unit its name says.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MIB = 1024 * 1024

# Ring-buffer columns, in order. "x" is the token index across the conversation's turns.
COLUMNS = (
    "x", "turn", "wall_ms", "compute_ms", "io_ms", "mgmt_ms",
    "stack_compute", "stack_io", "stack_mgmt",
    "read_mib", "read_mib_s", "cache_hit_pct",
    "rss_anon_mib", "rss_file_mib", "swap_mib", "mem_available_mib",
    "majflt", "majflt_mib", "cpu_cores", "loop_overhead_ms",
)


def _measured(value: Any) -> float:
    """-1 (or anything negative, or missing) is "not measured": NaN, a gap on the plot."""
    if value is None:
        return math.nan
    value = float(value)
    return math.nan if value < 0 else value


def row_values(get: Callable[[str], Any], x: int, turn: int) -> list[float]:
    """One ring-buffer row from a token's metrics, read by field name (TokenMetrics or dict).

    `x` and `turn` are the window's own counters across the conversation (the engine's turn
    numbers restart with every session)."""
    wall = _measured(get("wall_ms"))
    compute = _measured(get("compute_ms"))
    # The second layer of the stack: flash I/O when reads are serial, stall when they overlap.
    stall = _measured(get("stall_ms"))
    io = stall if not math.isnan(stall) else _measured(get("io_ms"))
    mgmt = _measured(get("mgmt_ms"))
    read_bytes = _measured(get("read_bytes"))
    read_mib = read_bytes / MIB
    io_ms = _measured(get("io_ms"))
    bandwidth = read_mib / (io_ms / 1e3) if io_ms > 0 else math.nan
    cpu = _measured(get("cpu_ms"))
    cores = cpu / wall if wall > 0 else math.nan
    return [
        float(x), float(turn), wall, compute, io, mgmt,
        compute, compute + io, compute + io + mgmt,
        read_mib, bandwidth, _measured(get("cache_hit_pct")),
        _measured(get("rss_anon_mib")), _measured(get("rss_file_mib")),
        _measured(get("swap_mib")), _measured(get("mem_available_mib")),
        _measured(get("majflt")), _measured(get("majflt_mib")), cores,
        _measured(get("loop_overhead_ms")),
    ]


def metrics_getter(metrics: Any) -> Callable[[str], Any]:
    if isinstance(metrics, dict):
        return metrics.get
    return lambda name: getattr(metrics, name, None)


@dataclass(frozen=True, slots=True)
class Curve:
    column: str
    name: str
    colour: str
    fill: bool = False  # filled down to zero (stacked layers are drawn top layer first)


@dataclass(frozen=True, slots=True)
class PlotSpec:
    key: str
    title: str
    unit: str
    curves: tuple[Curve, ...]


PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec("wall", "Wall time per token (stacked)", "ms", (
        Curve("stack_mgmt", "cache mgmt", "#9c27b0", fill=True),
        Curve("stack_io", "flash I/O or stall", "#ff9800", fill=True),
        Curve("stack_compute", "compute", "#2196f3", fill=True),
        Curve("wall_ms", "wall", "#222222"),
    )),
    PlotSpec("hit", "Expert-cache hit rate (cumulative)", "%", (
        Curve("cache_hit_pct", "hit rate", "#4caf50"),
    )),
    PlotSpec("read", "Flash read per token", "MiB", (
        Curve("read_mib", "read", "#ff9800"),
    )),
    PlotSpec("bandwidth", "Read bandwidth", "MiB/s", (
        Curve("read_mib_s", "bandwidth", "#795548"),
    )),
    PlotSpec("rss", "Resident memory", "MiB", (
        Curve("rss_anon_mib", "anon", "#e91e63"),
        Curve("rss_file_mib", "file-backed", "#3f51b5"),
    )),
    PlotSpec("mem", "Swap and available memory", "MiB", (
        Curve("swap_mib", "swap", "#f44336"),
        Curve("mem_available_mib", "MemAvailable", "#009688"),
    )),
    PlotSpec("faults", "Major page faults per token", "faults", (
        Curve("majflt", "major faults", "#607d8b"),
    )),
    PlotSpec("cpu", "CPU occupancy", "cores", (
        Curve("cpu_cores", "CPU time / wall", "#8bc34a"),
    )),
)

# A short readout per column for the hover line: (label, format)
READOUT: tuple[tuple[str, str, str], ...] = (
    ("wall_ms", "wall", "{:.1f} ms"), ("compute_ms", "compute", "{:.1f} ms"),
    ("io_ms", "I/O|stall", "{:.1f} ms"), ("mgmt_ms", "mgmt", "{:.1f} ms"),
    ("read_mib", "read", "{:.2f} MiB"), ("cache_hit_pct", "hit", "{:.1f}%"),
    ("rss_anon_mib", "anon", "{:.0f} MiB"), ("rss_file_mib", "file", "{:.0f} MiB"),
    ("mem_available_mib", "avail", "{:.0f} MiB"), ("majflt", "majflt", "{:.0f}"),
    ("cpu_cores", "cpu", "{:.2f} cores"),
)


def readout(row: Any, index: dict[str, int]) -> str:
    """'token 812 (turn 3): wall 41.0 ms · compute 41.0 ms · ...'; unmeasured shown as '–'."""
    parts = [f"token {int(row[index['x']])} (turn {int(row[index['turn']])})"]
    for column, label, fmt in READOUT:
        value = row[index[column]]
        parts.append(f"{label} {'–' if math.isnan(value) else fmt.format(value)}")
    return ": ".join([parts[0], " · ".join(parts[1:])])
