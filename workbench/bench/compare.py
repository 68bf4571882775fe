"""The compare table: summary figures of two or more arms with their intervals, each figure's
ratio to the first arm, and what differs in the arms' configuration.

An arm is a `RunGroup`: one configuration, its runs repeats. `compare()` groups runs by their
preamble (equal settings, model identity and engine version make equal preambles),
`compare_arms()` takes arms as given (the bench matrix knows them). How intervals are drawn
(docs/benchmarks.md):

- An arm with at least `min_repeats` (5) runs: whole runs are resampled, so the interval shows
  how much repeats disagree. Fewer runs: per-token figures resample blocks of tokens within each
  run, TTFT resamples turns, the cache hit rate (one cumulative value per run) gets no interval.
- A ratio: when both arms have the same number (>= min_repeats) of runs, repeat i of one arm is
  paired with repeat i of the other and pairs are resampled together (the paired bootstrap).
  Otherwise the ratio of each arm's own bootstrap draws, drawn independently.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.bench.figures import (
    FIGURES,
    QUALITY_FIGURES,
    Figure,
    RunFigures,
    pooled_estimate,
)
from workbench.bench.lossy import LOSSY_NAMES
from workbench.bench.stats import (
    Interval,
    block_bootstrap_draws,
    block_length,
    finite,
    interval_from_draws,
    pooled_draws,
    repeat_counts,
)
from workbench.plain_number import fixed

__all__ = [
    "FIGURES", "MIN_REPEATS", "MISSING", "Cell", "CompareTable", "ConfigDifference", "Figure",
    "Row", "RunFigures", "RunGroup", "compare", "compare_arms", "format_table", "group_runs",
    "load_runs",
]

MIN_REPEATS = 5  # below this a bootstrap over repeats has too few distinct resamples
MISSING = "—"
QUALITY_KEYS = frozenset(f.key for f in QUALITY_FIGURES)


@dataclass
class RunGroup:
    """One arm of the table: runs of one configuration (repeats of each other) under a label.

    Not a preset: a preset says what to run, a group holds what ran (the bench matrix makes one
    group per preset).
    """

    label: str
    runs: list[RunFigures]

    @property
    def n_tokens(self) -> int:
        return sum(r.n_tokens for r in self.runs)


@dataclass(frozen=True, slots=True)
class Cell:
    value: Interval | None  # None: not measured in this arm; NaN bounds: no interval
    ratio: Interval | None  # to the first arm; None for the first arm or when undefined


@dataclass(frozen=True, slots=True)
class Row:
    figure: Figure
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class ConfigDifference:
    key: str
    values: tuple[str | None, ...]  # one per arm; None when the arm's file lacks the key

    @property
    def lossy(self) -> bool:
        """A lossy lever (bench/lossy.py): the settings that can change the answers."""
        return self.key in LOSSY_NAMES


@dataclass
class CompareTable:
    arms: list[RunGroup]
    rows: list[Row]
    config_diff: list[ConfigDifference]
    methods: list[str] = field(default_factory=list)  # how each interval was drawn, in words
    level: float = 0.95

    def row(self, key: str) -> Row:
        for row in self.rows:
            if row.figure.key == key:
                return row
        raise KeyError(key)

    def cell(self, key: str, arm: int) -> Cell:
        return self.row(key).cells[arm]

    @property
    def quality_cause(self) -> str:
        """Which setting a quality difference comes from, in words ("" when no arm was scored):
        of the settings that differ, only the lossy levers can change what the model computes;
        the others (cache, policy, prefetch, threads) are lossless and cost speed only."""
        if not any(r.figure.key in QUALITY_KEYS for r in self.rows):
            return ""
        lossy = [d.key for d in self.config_diff if d.lossy]
        if not lossy:
            return ("quality: no lossy setting differs, so any quality difference is noise or "
                    "a different text or reference")
        if len(lossy) == 1:
            return f"quality: the difference comes from {lossy[0]}, the only lossy setting " \
                   "that differs"
        return f"quality: the difference comes from {', '.join(lossy)} together (lossy " \
               "settings that differ); score one at a time to separate them"


def load_runs(paths: Iterable[str | Path], trim: int = 0) -> list[RunFigures]:
    return [RunFigures.from_csv(p, trim) for p in paths]


def _letters(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"A{i}"


def group_runs(runs: Sequence[RunFigures],
               labels: Sequence[str] | None = None) -> list[RunGroup]:
    """Runs with equal preambles become repeats of one arm, in order of first appearance.

    Arms are labelled A, B, C... unless `labels` names them (one label per arm).
    """
    groups: dict[str, list[RunFigures]] = {}
    for run in runs:
        groups.setdefault(run.group_key, []).append(run)
    if labels is not None and len(labels) != len(groups):
        raise ValueError(f"{len(labels)} labels for {len(groups)} arms")
    names = list(labels) if labels is not None else [_letters(i) for i in range(len(groups))]
    return [RunGroup(name, members) for name, members in zip(names, groups.values(), strict=True)]


def compare(
    runs: Sequence[RunFigures],
    *,
    group: bool = True,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    min_repeats: int = MIN_REPEATS,
) -> CompareTable:
    """Group runs into arms (or one arm per run when `group` is False) and compare them."""
    arms = (group_runs(runs) if group
            else [RunGroup(_letters(i), [run]) for i, run in enumerate(runs)])
    return compare_arms(arms, resamples=resamples, level=level, seed=seed,
                        min_repeats=min_repeats)


# ---- intervals -------------------------------------------------------------------------------


def _ratio(num: float, den: float) -> float:
    return num / den if math.isfinite(num) and math.isfinite(den) and den != 0 else math.nan


def _parts(arm: RunGroup, figure: Figure) -> list[np.ndarray]:
    return [r.values(figure) for r in arm.runs]


def _draws(
    arm: RunGroup, figure: Figure, rng: np.random.Generator, resamples: int, min_repeats: int
) -> np.ndarray | None:
    """Bootstrap distribution of the arm's figure, or None where no interval can be drawn."""
    runs = arm.runs
    if len(runs) >= min_repeats:
        counts = repeat_counts(len(runs), resamples, rng)
        return pooled_draws(_parts(arm, figure), counts, figure.reduce, figure.q)
    measured = [m for m in (finite(p) for p in _parts(arm, figure)) if m.size]
    if figure.kind == "token" and measured:
        return block_bootstrap_draws(measured, figure.stat, resamples=resamples, seed=rng)
    if figure.kind == "turn" and sum(m.size for m in measured) >= 2:
        pooled = np.concatenate(measured)  # turns are independent requests: iid
        return block_bootstrap_draws([pooled], figure.stat, block=1, resamples=resamples,
                                     seed=rng)
    return None


def _paired_ratio_draws(
    first: RunGroup, other: RunGroup, figure: Figure, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """One count matrix for both arms: repeat i of each is drawn together."""
    counts = repeat_counts(len(first.runs), resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (pooled_draws(_parts(other, figure), counts, figure.reduce, figure.q)
                / pooled_draws(_parts(first, figure), counts, figure.reduce, figure.q))


def _interval(estimate: float, draws: np.ndarray | None, level: float) -> Interval | None:
    if not math.isfinite(estimate):
        return None
    if draws is None:
        return Interval(estimate, math.nan, math.nan)
    return interval_from_draws(estimate, draws, level)


def _paired(first: RunGroup, other: RunGroup, min_repeats: int) -> bool:
    return len(first.runs) == len(other.runs) >= min_repeats


def compare_arms(
    arms: Sequence[RunGroup],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    min_repeats: int = MIN_REPEATS,
) -> CompareTable:
    if not arms:
        raise ValueError("nothing to compare: give at least one run")
    arms = list(arms)
    rows = []
    scored = any(run.scored for arm in arms for run in arm.runs)
    for fi, figure in enumerate((*FIGURES, *QUALITY_FIGURES) if scored else FIGURES):
        estimates = [pooled_estimate(arm.runs, figure) for arm in arms]
        draws = [_draws(arm, figure, np.random.default_rng([seed, ai, fi]), resamples,
                        min_repeats) for ai, arm in enumerate(arms)]
        cells = [Cell(_interval(estimates[0], draws[0], level), None)]
        for ai in range(1, len(arms)):
            estimate = _ratio(estimates[ai], estimates[0])
            if _paired(arms[0], arms[ai], min_repeats):
                rng = np.random.default_rng([seed, 1000 + ai, fi])
                ratio_draws: np.ndarray | None = _paired_ratio_draws(
                    arms[0], arms[ai], figure, rng, resamples)
            elif draws[0] is not None and draws[ai] is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio_draws = draws[ai] / draws[0]
            else:
                ratio_draws = None
            cells.append(Cell(_interval(estimates[ai], draws[ai], level),
                              _interval(estimate, ratio_draws, level)))
        rows.append(Row(figure, tuple(cells)))
    return CompareTable(arms, rows, config_difference(arms), _methods(arms, min_repeats), level)


def _methods(arms: list[RunGroup], min_repeats: int) -> list[str]:
    """How the intervals were drawn, one line per method (arms sharing one share the line)."""
    by_method: dict[str, list[str]] = {}
    for arm in arms:
        n = len(arm.runs)
        if n >= min_repeats:
            how = f"bootstrap across the {n} repeats"
        else:
            blocks = sorted({block_length(r.n_tokens) for r in arm.runs if r.n_tokens})
            size = "/".join(str(b) for b in blocks)
            how = (f"block bootstrap within each run (blocks of {size} tokens; TTFT over "
                   "turns; none for the hit rate, which is cumulative)" if blocks
                   else "no decode tokens to resample")
        by_method.setdefault(how, []).append(arm.label)
    for arm in arms[1:]:
        how = (f"paired bootstrap across {len(arm.runs)} repeats"
               if _paired(arms[0], arm, min_repeats)
               else "independent bootstraps of the two arms")
        by_method.setdefault(how, []).append(f"{arm.label}/{arms[0].label}")
    return [f"{', '.join(labels)}: {how}" for how, labels in by_method.items()]


# ---- configuration difference ---------------------------------------------------------------


def _arm_config(arm: RunGroup, settings_view: bool) -> dict[str, str]:
    run = arm.runs[0]
    if settings_view:
        return run.config
    return {k: v for k, v in run.preamble.items() if not k.startswith("wb_")}


def config_difference(arms: Sequence[RunGroup]) -> list[ConfigDifference]:
    """Keys whose values differ between arms. Our files are compared by settings (plus engine and
    model identity); once an upstream file is among them, by the preamble keys both write."""
    settings_view = all(run.has_settings for arm in arms for run in arm.runs)
    configs = [_arm_config(arm, settings_view) for arm in arms]
    keys = sorted(set().union(*configs))
    out = []
    for key in keys:
        values = tuple(c.get(key) for c in configs)
        if len(set(values)) > 1:
            out.append(ConfigDifference(key, values))
    return out


# ---- text ------------------------------------------------------------------------------------


def format_number(x: float, digits: int = 4) -> str:
    if not math.isfinite(x):
        return MISSING
    return fixed(x, ".0f") if abs(x) >= 10**digits else f"{x:.{digits}g}"


def format_interval(iv: Interval | None, prefix: str = "", digits: int = 4) -> str:
    """ "12.3 [11.9, 12.8]"; just the estimate when there is no interval; "—" when unmeasured."""
    if iv is None:
        return MISSING
    text = prefix + format_number(iv.estimate, digits)
    if math.isfinite(iv.low) and math.isfinite(iv.high):
        text += f" [{format_number(iv.low, digits)}, {format_number(iv.high, digits)}]"
    return text


def _ratio_text(iv: Interval | None) -> str:
    text = format_interval(iv, "×", digits=3)
    if iv is not None and math.isfinite(iv.low) and iv.excludes(1.0):
        text += " *"
    return text


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _describe(arm: RunGroup) -> str:
    files = ", ".join(Path(r.source).name or r.label for r in arm.runs)
    runs = f"{len(arm.runs)} run" + ("s" if len(arm.runs) != 1 else "")
    return f"  {arm.label}: {runs}, {arm.n_tokens} tokens ({files})"


def format_table(table: CompareTable) -> str:
    """The table as plain text, columns aligned (what `python -m workbench compare` prints)."""
    arms = table.arms
    lines = [f"Compare: {len(arms)} arm{'s' if len(arms) != 1 else ''}, "
             f"{100 * table.level:g} % intervals"]
    lines += [_describe(arm) for arm in arms]
    trim = {r.trim for arm in arms for r in arm.runs}
    if trim != {0}:
        lines.append(f"  warm-up trim: first {'/'.join(map(str, sorted(trim)))} tokens of "
                     "every turn left out")
    header = ["figure", "unit", arms[0].label]
    for arm in arms[1:]:
        header += [arm.label, f"{arm.label}/{arms[0].label}"]
    grid = [header]
    for row in table.rows:
        line = [row.figure.label, row.figure.unit, format_interval(row.cells[0].value)]
        for cell in row.cells[1:]:
            line += [format_interval(cell.value), _ratio_text(cell.ratio)]
        grid.append(line)
    lines += ["", *_align(grid)]
    lines += ["", "configuration difference:"]
    if table.config_diff:
        diff = [["setting", *(a.label for a in arms)]]
        diff += [[d.key + (" (lossy)" if d.lossy else ""),
                  *(MISSING if v is None else v for v in d.values)] for d in table.config_diff]
        lines += ["  " + line for line in _align(diff)]
    else:
        lines.append("  none (the arms ran the same configuration)")
    if table.quality_cause:
        lines.append("  " + table.quality_cause)
    lines += ["", "intervals:", *("  " + m for m in table.methods)]
    if len(arms) > 1:
        lines.append("  * the ratio's interval excludes 1: a difference, not noise")
    return "\n".join(lines) + "\n"
