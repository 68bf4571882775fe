"""What the live plots show: the columns derived from each token's metrics, and the plots (Qt-free).

This is the unit boundary of the telemetry: an unmeasured engine value (-1) becomes NaN here, so
plots draw a gap, never a zero. Every column is in the unit its name says. The fields read are
columns of workbench/engine/metric_columns.py; the ring-buffer columns and the row that fills
them are one table, `SERIES`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from workbench.engine import metric_columns, metric_labels
from workbench.engine.measured import as_measured
from workbench.engine.token_choice import TokenChoice
from workbench.ui.telemetry import speculation

MIB = 1024 * 1024

# The token's fields the plots read, each once per token, -1 turned into NaN. Checked against
# the metric table at import: a renamed column fails here instead of plotting a silent gap.
FIELDS = (
    "wall_ms", "compute_ms", "io_ms", "stall_ms", "mgmt_ms", "read_bytes", "cpu_ms",
    "cache_hit_pct", "rss_anon_mib", "rss_file_mib", "swap_mib", "mem_available_mib",
    "majflt", "majflt_mib", "loop_overhead_ms", "experts_routed", "experts_dropped",
    "grammar_ms", *speculation.FIELDS,
)
_unknown = [name for name in FIELDS if name not in metric_columns.BY_NAME]
if _unknown:
    raise metric_columns.ColumnsDrift(f"the plots read undeclared fields: {_unknown}")

Measured = dict[str, float]  # FIELDS by name (NaN where unmeasured), plus "x" and "turn"


_measured = as_measured  # -1 (or missing) is "not measured": NaN, a gap on the plot


def _io_or_stall(v: Measured) -> float:
    """The second layer of the stack: flash I/O when reads are serial, stall when they overlap."""
    stall = v["stall_ms"]
    return stall if not math.isnan(stall) else v["io_ms"]


def _read_mib(v: Measured) -> float:
    return v["read_bytes"] / MIB


def _bandwidth(v: Measured) -> float:
    io_ms = v["io_ms"]  # the reads' own time, not the stall
    return _read_mib(v) / (io_ms / 1e3) if io_ms > 0 else math.nan


def _cores(v: Measured) -> float:
    wall = v["wall_ms"]
    return v["cpu_ms"] / wall if wall > 0 else math.nan


def _drop_pct(v: Measured) -> float:
    """Share of this token's routings the drop policy skipped; a gap while dropping is off."""
    routed = v["experts_routed"]
    return 100.0 * v["experts_dropped"] / routed if routed > 0 else math.nan


def _stack_io(v: Measured) -> float:
    return v["compute_ms"] + _io_or_stall(v)


def _stack_mgmt(v: Measured) -> float:
    return _stack_io(v) + v["mgmt_ms"]


# Ring-buffer columns, in order, each with how it is computed from the token's measured fields;
# COLUMNS and row_values both come from here. "x" is the token index across the conversation's
# turns, "turn" the window's turn counter (the engine's restarts with every session).
SERIES: tuple[tuple[str, Callable[[Measured], float]], ...] = (
    ("x", itemgetter("x")),
    ("turn", itemgetter("turn")),
    ("wall_ms", itemgetter("wall_ms")),
    ("compute_ms", itemgetter("compute_ms")),
    ("io_ms", _io_or_stall),
    ("mgmt_ms", itemgetter("mgmt_ms")),
    ("stack_compute", itemgetter("compute_ms")),
    ("stack_io", _stack_io),
    ("stack_mgmt", _stack_mgmt),
    ("read_mib", _read_mib),
    ("read_mib_s", _bandwidth),
    ("cache_hit_pct", itemgetter("cache_hit_pct")),
    ("drop_pct", _drop_pct),
    ("rss_anon_mib", itemgetter("rss_anon_mib")),
    ("rss_file_mib", itemgetter("rss_file_mib")),
    ("swap_mib", itemgetter("swap_mib")),
    ("mem_available_mib", itemgetter("mem_available_mib")),
    ("majflt", itemgetter("majflt")),
    ("majflt_mib", itemgetter("majflt_mib")),
    ("cpu_cores", _cores),
    ("loop_overhead_ms", itemgetter("loop_overhead_ms")),
    ("grammar_ms", itemgetter("grammar_ms")),
    *speculation.SERIES,
)
COLUMNS = tuple(name for name, _ in SERIES)
_COMPUTE = tuple(compute for _, compute in SERIES)


def row_values(get: Callable[[str], Any], x: int, turn: int) -> list[float]:
    """One ring-buffer row (COLUMNS order) from a token's metrics, read by field name
    (TokenMetrics or dict). `x` and `turn` are the window's own counters."""
    v = {name: _measured(get(name)) for name in FIELDS}
    v["x"], v["turn"] = float(x), float(turn)
    return [compute(v) for compute in _COMPUTE]


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


def labelled(column: str, colour: str, short: bool = False) -> Curve:
    """A curve of a figure the metric table names: its legend is that name (engine/
    metric_labels.py), the short one where a legend has little room."""
    shown = metric_labels.BY_NAME[column]
    return Curve(column, shown.short if short else shown.label, colour)


@dataclass(frozen=True, slots=True)
class PlotSpec:
    key: str
    title: str  # may name the reads: "{read}" (see read_terms)
    unit: str  # "" for a count
    curves: tuple[Curve, ...]
    y_max: float | None = None  # the axis never goes past this (a percentage stops at 100)
    # Over the plot while its columns are unmeasured: what would measure them.
    unmeasured: str = "not measured\n(needs expert streaming)"  # two lines: a plot is narrow


# Titles are short enough for two plots side by side in a dock beside the chat (~230 px each
# at 9 pt): a pyqtgraph title is as wide as its text at the least.
PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec("wall", "Wall time per token", "ms", (
        Curve("stack_mgmt", "cache mgmt", "#9c27b0", fill=True),
        Curve("stack_io", "{io} or stall", "#ff9800", fill=True),
        Curve("stack_compute", "compute", "#2196f3", fill=True),
        labelled("wall_ms", "#222222", short=True),
    )),
    # Under dropping the hit rate rises without the cache serving more (a dropped routing is a
    # miss never looked up), so the drop rate is drawn beside it, per token.
    PlotSpec("hit", "Cache hits and drops", "%", (
        labelled("cache_hit_pct", "#4caf50"),
        labelled("drop_pct", "#f44336"),
    ), y_max=100.0),
    PlotSpec("read", "{read} / token", "MiB", (
        labelled("read_mib", "#ff9800"),
    )),
    PlotSpec("bandwidth", "Read bandwidth", "MiB/s", (
        Curve("read_mib_s", "bandwidth", "#795548"),
    )),
    PlotSpec("rss", "Resident memory", "MiB", (
        labelled("rss_anon_mib", "#e91e63", short=True),
        labelled("rss_file_mib", "#3f51b5", short=True),
    )),
    PlotSpec("mem", "Swap and available", "MiB", (
        labelled("swap_mib", "#f44336", short=True),
        labelled("mem_available_mib", "#009688"),
    )),
    PlotSpec("faults", "Major page faults per token", "", (
        labelled("majflt", "#607d8b"),
    )),
    PlotSpec("cpu", "CPU occupancy", "cores", (
        labelled("cpu_cores", "#8bc34a"),
    )),
    PlotSpec(speculation.PLOT[0], speculation.PLOT[1], speculation.PLOT[2],
             tuple(Curve(*c) for c in speculation.PLOT[3]), unmeasured=speculation.UNMEASURED),
)


def read_terms(o_direct: bool) -> dict[str, str]:
    """What the expert reads are called. Only O_DIRECT reads come from the drive every time;
    buffered ones (O_DIRECT off, or refused by the file system) may be served from the page
    cache, so calling them "flash" would overstate what they cost."""
    if o_direct:
        return {"read": "Flash read", "io": "flash I/O"}
    return {"read": "Read (page cache)", "io": "read (page cache)"}


def plot_title(spec: PlotSpec, o_direct: bool, unit: str | None = None) -> str:
    """'Flash read per token (MiB)'; `unit` overrides the spec's (an axis shown in GiB)."""
    unit = spec.unit if unit is None else unit
    title = spec.title.format(**read_terms(o_direct))
    return f"{title} ({unit})" if unit else title


def curve_name(curve: Curve, o_direct: bool) -> str:
    return curve.name.format(**read_terms(o_direct))


def axis_unit(unit: str, top: float) -> tuple[str, float]:
    """The unit an axis reaching `top` (in `unit`) is labelled in, and the factor to it: MiB
    becomes GiB from a GiB on, where the tick labels would grow to four and five digits."""
    if unit.startswith("MiB") and top >= 1024:
        return "GiB" + unit[3:], 1 / 1024
    return unit, 1.0

# The hover line's figures and the digits each is shown with; what they are called and their
# units are the metric table's (engine/metric_labels.py).
READOUT: tuple[tuple[str, int], ...] = (
    ("wall_ms", 1), ("compute_ms", 1), ("io_ms", 1), ("mgmt_ms", 1), ("read_mib", 2),
    ("cache_hit_pct", 1), ("drop_pct", 1), ("rss_anon_mib", 0), ("rss_file_mib", 0),
    ("mem_available_mib", 0), ("majflt", 0), ("cpu_cores", 2), ("grammar_ms", 2),
)


def readout(row: Any, index: dict[str, int], choice: TokenChoice | None = None) -> str:
    """'token 812 (turn 3): wall 41.0 ms · compute 41.0 ms · ...'; unmeasured shown as '–'.
    With the token view's `choice` the token comes first, with what it was chosen from:
    'token 812 (turn 3) " fox" p 0.82, alternatives " fox" 0.82 · " dog" 0.1: wall ...'."""
    head = f"token {int(row[index['x']])} (turn {int(row[index['turn']])})"
    parts = [f"{head} {choice_text(choice)}" if choice is not None else head]
    for column, digits in READOUT:
        value = row[index[column]]
        shown = ("–" if math.isnan(value)
                 else metric_labels.readout_value(column, value, digits))
        parts.append(f"{metric_labels.BY_NAME[column].short} {shown}")
    return ": ".join([parts[0], " · ".join(parts[1:])])


def choice_text(choice: TokenChoice) -> str:
    """'" fox" p 0.82, alternatives " fox" 0.82 · " dog" 0.1': a token, its probability, and
    the likeliest candidates it was picked from (the token view, ui/chat/token_view.py)."""
    shown = f"{_quoted(choice.text)} p {choice.p:.3g}"
    alternatives = " · ".join(f"{_quoted(text)} {p:.3g}" for text, p in choice.alternatives())
    return f"{shown}, alternatives {alternatives}" if alternatives else shown


def _quoted(text: str) -> str:
    """A token's text in quotes, its spaces kept and its line breaks and tabs spelt out."""
    return json.dumps(text, ensure_ascii=False)
