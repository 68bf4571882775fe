"""What the window calls each per-token figure, and the unit it shows it in: one entry per
figure, for the run curves, the plot readouts and anything else that names a metric.

Units are not declared here: a column's is the metric table's (`metric_columns.SPECS`), so a
label and the file cannot disagree; only a series derived from a column (read_bytes shown in
MiB) declares its own, with the column it comes from. Checked at import against the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.engine import metric_columns


@dataclass(frozen=True, slots=True)
class Shown:
    name: str  # a column of the metric table, or a series derived from `of`
    label: str  # what a legend or a list calls it: "decode wall"
    short: str  # what a one-line readout calls it: "wall"
    of: str = ""  # the column a derived series is computed from ("" for a column itself)
    derived_unit: str = ""  # a derived series' unit (a column's comes from the table)

    @property
    def unit(self) -> str:
        return self.derived_unit if self.of else metric_columns.BY_NAME[self.name].unit


SHOWN: tuple[Shown, ...] = (
    Shown("wall_ms", "decode wall", "wall"),
    Shown("cpu_ms", "CPU time", "cpu time"),
    Shown("compute_ms", "compute", "compute"),
    Shown("io_ms", "expert I/O", "I/O|stall"),
    Shown("stall_ms", "I/O stall", "stall"),
    Shown("mgmt_ms", "cache management", "mgmt"),
    Shown("loop_overhead_ms", "loop overhead", "overhead"),
    Shown("read_mib", "read", "read", of="read_bytes", derived_unit="MiB"),
    Shown("cache_hit_pct", "cache hit (cumulative)", "hit"),
    Shown("drop_pct", "dropped (per token)", "dropped", of="experts_dropped",
          derived_unit="%"),
    Shown("majflt", "major faults", "majflt"),
    Shown("majflt_mib", "faulted in", "faulted"),
    Shown("rss_mib", "resident memory", "rss"),
    Shown("rss_anon_mib", "anonymous resident", "anon"),
    Shown("rss_file_mib", "file-backed resident", "file"),
    Shown("mem_available_mib", "memory available", "avail"),
    Shown("swap_mib", "swapped", "swap"),
    Shown("cache_budget_mib", "cache budget", "budget"),
    Shown("dense_resident_frac", "dense weights resident", "dense"),
    Shown("cpu_cores", "CPU time / wall", "cpu", of="cpu_ms", derived_unit="cores"),
    Shown("grammar_ms", "grammar", "grammar"),
)
BY_NAME: dict[str, Shown] = {s.name: s for s in SHOWN}
UNITLESS = frozenset({"count"})  # a readout prints the number alone
TIGHT = frozenset({"%"})  # a readout prints the unit without a space: 12.5%


def label(name: str) -> str:
    return BY_NAME[name].label


def unit(name: str) -> str:
    return BY_NAME[name].unit


def readout_value(name: str, value: float, digits: int) -> str:
    """'20.0 ms', '12.5%', '3': the value in the figure's unit, as a readout prints it."""
    number = f"{value:.{digits}f}"
    shown_unit = unit(name)
    if shown_unit in UNITLESS:
        return number
    return number + shown_unit if shown_unit in TIGHT else f"{number} {shown_unit}"


def _check(shown: tuple[Shown, ...] = SHOWN) -> None:
    problems = []
    names = [s.name for s in shown]
    if len(set(names)) != len(names):
        problems.append("a figure is named twice")
    for s in shown:
        if s.of:
            if s.of not in metric_columns.BY_NAME:
                problems.append(f"{s.name} is derived from {s.of}, which is not a column")
            if s.name in metric_columns.BY_NAME:
                problems.append(f"{s.name} is a column: its unit is the table's, not derived")
            if not s.derived_unit:
                problems.append(f"{s.name} is derived and names no unit")
        elif s.name not in metric_columns.BY_NAME:
            problems.append(f"{s.name} is neither a column nor derived from one")
        elif s.derived_unit:
            problems.append(f"{s.name}: a column's unit is the table's; do not repeat it")
    if problems:
        raise metric_columns.ColumnsDrift("metric_labels: " + "; ".join(problems))


_check()
