"""`bench matrix`: named presets over a prompt set, interleaved, one metrics file per run.

A run is one arm (preset) and one repeat: a fresh session that answers every prompt of the set as
a new chat, writing one metrics file. Each arm first gets an unmeasured warm-up run; then the
repeats go round the arms in ABAB order (or ABBA, or a seeded shuffle), because a fixed order
lets reclaim hysteresis and throttling favour one arm (docs/benchmarks.md, "Bench matrix"). With
`fresh_process` each run is its own Python process (nothing warm carries over); with `cold` the
model file leaves the page cache before each run. The compare table pairs repeat i of every arm.

Run as a module, this file is the fresh-process worker:
    python -m workbench.bench.matrix --worker SETTINGS_JSON PROMPTS_JSON_FILE CSV_PATH
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.atomic_write import OutputFileError, explain, write_text_atomic
from workbench.bench.arms import ArmError, check_arms
from workbench.bench.compare import CompareTable, RunGroup, compare_arms, format_table
from workbench.bench.figures import RunFigures
from workbench.config import Config, setting_names
from workbench.presets import Preset

ORDERS = ("abab", "abba", "shuffle")
# (done, total, arm, repeat): called after each run; repeat 0 is the arm's warm-up.
Progress = Callable[[int, int, str, int], None]


class MatrixError(RuntimeError):
    """A run failed; the message names the run and says why."""


def default_base() -> Config:
    """Greedy raw-text decoding of 256 tokens: every arm gets the same tokens to generate."""
    return Config(n_predict=256, temp=0.0, chat_template=False)


@dataclass(frozen=True, slots=True)
class ScheduledRun:
    arm: str
    repeat: int  # 1-based; 0 is the warm-up
    path: Path


@dataclass(frozen=True, slots=True)
class RunRecord:
    arm: str
    repeat: int
    path: Path
    n_generated: int
    seconds: float  # whole run, load included (for the log, not a figure)


@dataclass
class MatrixPlan:
    presets: list[Preset]
    prompts: list[str]
    out_dir: Path
    base: Config = field(default_factory=default_base)
    repeats: int = 5
    warmup: bool = True
    order: str = "abab"
    seed: int = 0
    fresh_process: bool = False
    cold: bool = False
    trim: int = 0  # warm-up tokens left out of every turn in the table
    # Create out_dir's missing parents too: only for the default location, under the data
    # directory, which is the app's. A directory the user names must have an existing parent.
    make_parents: bool = False
    # Score every arm's quality after the speed runs (bench/matrix_quality.py): positions of
    # the text (None: the bundled reference text) against each arm's lossless reference.
    score: bool = False
    score_text: Path | None = None
    score_tokens: int = 256

    def configs(self) -> dict[str, Config]:
        """Every arm's config, validated before anything runs (ArmError, or PresetError)."""
        check_arms(self.presets)
        if self.order not in ORDERS:
            raise ArmError(f"order {self.order!r}: use one of {', '.join(ORDERS)}")
        if self.repeats < 1:
            raise ArmError("repeats must be 1 or more")
        if not self.prompts:
            raise ArmError("no prompts to run")
        if self.score:
            from workbench.bench.quality import QualityError, default_text_path, read_text

            if self.score_tokens < 1:
                raise ArmError("--score-tokens must be 1 or more")
            try:  # refused now, not after the speed runs
                read_text(self.score_text or default_text_path())
            except QualityError as exc:
                raise ArmError(str(exc)) from exc
        return {p.name: p.config(self.base) for p in self.presets}

    def schedule(self) -> list[ScheduledRun]:
        names = [p.name for p in self.presets]
        runs = [ScheduledRun(n, 0, self.out_dir / "warmup" / f"{n}.csv")
                for n in names] if self.warmup else []
        rng = np.random.default_rng(self.seed)
        for r in range(1, self.repeats + 1):
            if self.order == "shuffle":
                order = [names[i] for i in rng.permutation(len(names))]
            elif self.order == "abba" and r % 2 == 0:
                order = names[::-1]
            else:
                order = names
            runs += [ScheduledRun(n, r, self.out_dir / f"{n}-r{r}.csv") for n in order]
        return runs


@dataclass
class MatrixResult:
    plan: MatrixPlan
    runs: list[RunRecord]  # measured runs, in the order they ran
    warmups: list[RunRecord]
    table: CompareTable
    quality: list[Any] = field(default_factory=list)  # ArmQuality per arm, with --score
    quality_text: str = ""

    @property
    def text(self) -> str:
        return format_table(self.table) + (f"\n{self.quality_text}" if self.quality_text else "")


# ---- one run ---------------------------------------------------------------------------------


def drop_page_cache(path: Path) -> None:
    """Ask the kernel to drop the file's cached pages (no root needed), every shard of a split
    model. Pages still mapped by a running process stay; dirty pages would too, so a file just
    written (a generated model) is flushed first."""
    from workbench.moe.layout import read_model_facts

    for shard in read_model_facts(path).shards:
        fd = os.open(shard, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def model_path(config: Config) -> Path:
    if config.model:
        return Path(config.model)
    # gemma-3-270m, not the chat default: the matrix's figures are compared across runs on it.
    from workbench.embedded import gemma_model_path

    return gemma_model_path()


def generate_all(config: Config, prompts: list[str], csv_path: Path) -> int:
    """Answer every prompt as a new chat in one session; returns tokens generated.

    The session lives on the process's bench engine thread (bench/engine.py), as chat's does:
    opened, every turn and closed there, whichever thread runs the matrix (the CLI's main
    thread, the window's matrix worker, a fresh-process worker)."""
    from workbench.bench.engine import close_session, on_engine, open_session
    from workbench.engine.requests import GenerateRequest, SessionError
    from workbench.engine.sinks import CsvMetricsSink

    with CsvMetricsSink(csv_path) as sink:  # its directory: made by run_matrix
        try:
            session = open_session(config, sink=sink)
        except SessionError as exc:
            raise MatrixError(str(exc)) from exc
        try:
            total = 0
            for prompt in prompts:
                request = GenerateRequest(text=prompt, new_chat=True)
                result = on_engine(lambda r=request: session.generate(r))
                if result.error or result.summary is None:
                    raise MatrixError(result.error or "the turn produced no summary")
                total += result.summary.n_generated
            return total
        finally:
            close_session(session)


def _run_in_subprocess(config: Config, prompts_file: Path, csv_path: Path) -> int:
    cmd = [sys.executable, "-m", "workbench.bench.matrix", "--worker",
           json.dumps(config.to_dict()), str(prompts_file), str(csv_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise MatrixError(f"worker exited with {proc.returncode}: {tail}")
    return int(json.loads(proc.stdout.strip().splitlines()[-1])["n_generated"])


# ---- the matrix ------------------------------------------------------------------------------


def _write_manifest(plan: MatrixPlan, configs: dict[str, Config], runs: list[RunRecord]) -> None:
    manifest = {
        "presets": {p.name: setting_names(p.settings) for p in plan.presets},
        "settings": {name: c.to_dict() for name, c in configs.items()},
        "prompts": plan.prompts,
        "repeats": plan.repeats, "warmup": plan.warmup, "order": plan.order, "seed": plan.seed,
        "fresh_process": plan.fresh_process, "cold": plan.cold, "trim": plan.trim,
        "runs": [{"arm": r.arm, "repeat": r.repeat, "path": r.path.name,
                  "n_generated": r.n_generated} for r in runs],
    }
    write_text_atomic(plan.out_dir / "matrix.json",
                      json.dumps(manifest, indent=2, default=str) + "\n")


def arms_from_runs(plan: MatrixPlan, runs: list[RunRecord]) -> list[RunGroup]:
    """One arm per preset, its runs in repeat order (so repeat i pairs across arms)."""
    arms = []
    for preset in plan.presets:
        mine = sorted((r for r in runs if r.arm == preset.name), key=lambda r: r.repeat)
        arms.append(RunGroup(preset.name, [RunFigures.from_csv(r.path, plan.trim,
                                                               label=f"{r.arm} r{r.repeat}")
                                           for r in mine]))
    return arms


def run_matrix(
    plan: MatrixPlan,
    *,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> MatrixResult:
    """Run every scheduled run, write the CSVs, matrix.json and compare.txt, return the table.

    Raises PresetError (or ArmError) before anything runs when a preset is unusable, MatrixError
    when a run fails.
    """
    configs = plan.configs()
    _make_out_dir(plan)
    prompts_file = plan.out_dir / "prompts.json"  # what the fresh-process worker reads
    write_text_atomic(prompts_file, json.dumps(plan.prompts, ensure_ascii=False, indent=1) + "\n")
    schedule = plan.schedule()
    measured: list[RunRecord] = []
    warmups: list[RunRecord] = []
    for done, run in enumerate(schedule, start=1):
        config = configs[run.arm]
        if plan.cold:
            drop_page_cache(model_path(config))
        started = time.perf_counter()
        try:
            if plan.fresh_process:
                n = _run_in_subprocess(config, prompts_file, run.path)
            else:
                n = generate_all(config, plan.prompts, run.path)
        except MatrixError as exc:
            what = "warm-up" if run.repeat == 0 else f"repeat {run.repeat}"
            raise MatrixError(f"{run.arm} {what} ({run.path.name}): {exc}") from exc
        record = RunRecord(run.arm, run.repeat, run.path, n, time.perf_counter() - started)
        (warmups if run.repeat == 0 else measured).append(record)
        if log is not None:
            what = "warm-up" if run.repeat == 0 else f"repeat {run.repeat}/{plan.repeats}"
            log(f"run {done}/{len(schedule)}: {run.arm} {what}: {n} tokens in "
                f"{record.seconds:.1f} s -> {run.path.name}")
        if progress is not None:
            progress(done, len(schedule), run.arm, run.repeat)
    _write_manifest(plan, configs, measured)
    table = compare_arms(arms_from_runs(plan, measured), seed=plan.seed)
    result = MatrixResult(plan, measured, warmups, table)
    if plan.score:
        _score(plan, configs, result, log)
    write_text_atomic(plan.out_dir / "compare.txt", format_table(table))
    return result


def _score(plan: MatrixPlan, configs: dict[str, Config], result: MatrixResult,
           log: Callable[[str], None] | None) -> None:
    """Each arm's quality beside its speed, and the Pareto front (bench/matrix_quality.py)."""
    from workbench.bench import matrix_quality, quality
    from workbench.engine.requests import SessionError

    try:
        reports = matrix_quality.score_arms(configs, plan.score_text or
                                            quality.default_text_path(), plan.score_tokens, log)
    except (quality.QualityError, SessionError) as exc:
        raise MatrixError(f"scoring: {exc}") from exc
    result.quality = matrix_quality.arm_qualities(result.table, reports)
    result.quality_text = matrix_quality.write_quality(plan.out_dir, result.quality)


def _make_out_dir(plan: MatrixPlan) -> None:
    """The output directory (and its warmup/): made here, because the user asked for it by
    name; its parent must exist unless the plan is at the app's default location."""
    out = plan.out_dir
    if out.exists() and not out.is_dir():
        raise OutputFileError(f"{out} is a file: give a directory for the matrix's files")
    try:
        if plan.make_parents:
            out.parent.mkdir(parents=True, exist_ok=True)
        elif not out.parent.is_dir():
            raise OutputFileError(f"the directory {out.parent} does not exist: create it "
                                  "first, or choose another output directory")
        out.mkdir(exist_ok=True)
        if plan.warmup:
            (out / "warmup").mkdir(exist_ok=True)
    except OutputFileError:
        raise
    except OSError as exc:
        raise explain(exc, out) from exc


def _worker(argv: list[str]) -> int:
    """Fresh-process run: settings JSON, prompts JSON file, CSV path; prints {"n_generated": N}."""
    settings_json, prompts_file, csv_path = argv
    config = Config.from_dict(json.loads(settings_json))
    prompts = json.loads(Path(prompts_file).read_text(encoding="utf-8"))
    try:
        n = generate_all(config, prompts, Path(csv_path))
    except MatrixError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"n_generated": n}))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--worker"] or len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(_worker(sys.argv[2:]))
