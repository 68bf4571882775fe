"""Scoring a text for quality: what a setting costs against the lossless reference.

The model reads the text teacher-forced (engine/scoring.py), one token per decode, twice, in two
sessions opened one after the other: under the lossless reference settings (the same model, read
whole, nothing dropped, no override, no speculation), whose logits are kept on disk, then under
the settings given, whose every position is compared with the reference's as it is read. The
figures are bench/quality_stats.py's; docs/quality.md says how to read them.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.bench.engine import on_engine, opened
from workbench.bench.lossy import CACHE_DEPENDENT, LOSSY_GROUP
from workbench.bench.quality_stats import (
    PositionSeries,
    QualityFigures,
    SeriesBuilder,
    figures,
    log_softmax,
)
from workbench.bench.stats import Interval, aggregate_rate_ci
from workbench.config import SETTINGS, Config
from workbench.engine.metrics import UNMEASURED, RunInfo, RunSummary, TokenMetrics
from workbench.engine.scoring import ForcedRun
from workbench.engine.session import Session
from workbench.file_kind import TextFileError, read_utf8_text
from workbench.paths import resources_dir

# progress(phase, done, total): phase is "reference" or "setting".
Progress = Callable[[str, int, int], None]


class QualityError(RuntimeError):
    """Scoring could not run; the message says why and what to do."""


def default_text_path() -> Path:
    return resources_dir() / "quality" / "reference.txt"


def read_text(path: Path) -> str:
    """A reference text: any UTF-8 file. QualityError says what is wrong with another."""
    try:
        return read_utf8_text(path)
    except TextFileError as exc:
        hint = {"kind": "give a UTF-8 text file", "encoding": "save it as UTF-8",
                "empty": "there is nothing to score"}.get(exc.reason)
        message = exc.sentence(str(path))
        raise QualityError(f"{message}: {hint}" if hint else message) from exc


def reference_config(setting: Config, *, streamed: bool = False) -> Config:
    """The lossless reference for `setting`: every lossy lever at its default, no speculation,
    and the model read whole (or, `streamed`, streamed as the setting says with nothing lost)."""
    lossless = {s.name: s.default for s in SETTINGS if s.group == LOSSY_GROUP}
    ref = setting.replace(**lossless, spec="off")
    return ref if streamed else ref.replace(moe_stream=False)


def for_scoring(config: Config) -> Config:
    """The settings a scoring session opens with: as given, except the tokens to generate,
    which scoring never uses (it generates nothing) and which must not refuse a small context."""
    return config.replace(n_predict=min(config.n_predict, max(1, config.n_ctx // 2)))


def batch_refusal(setting: Config) -> str:
    """Why this setting cannot be scored in wide batches ("" when it can)."""
    dependent = [n for n in CACHE_DEPENDENT
                 if getattr(setting, n) != next(s.default for s in SETTINGS if s.name == n)]
    if dependent:
        return (f"{', '.join(dependent)} depends on what the expert cache holds as each token "
                "is read, and a batch routes every position before reading any expert, so it "
                "would be measured against a cache generation never sees. Score it one token "
                "per decode (leave out --batched)")
    if setting.spec != "off":
        return "speculative decoding is scored as it runs, one verify step at a time"
    return ""


@dataclass(slots=True)
class ArmRun:
    """One of the two reads: its settings (those off the defaults) and what it cost."""

    label: str
    settings: dict[str, object]
    forced: ForcedRun

    @property
    def tok_s(self) -> Interval:
        """Positions per second over decode time alone (the KL work is outside the bracket)."""
        return aggregate_rate_ci(self.forced.decode_ms)


@dataclass(slots=True)
class QualityReport:
    text_name: str
    n_text_tokens: int  # the whole text's tokens
    n_scored: int  # positions scored
    notes: list[str]
    mode: str  # "one token per decode", "speculative", "batched (N)"
    setting: ArmRun
    reference: ArmRun
    series: PositionSeries
    figures: QualityFigures
    info: RunInfo | None = None  # the setting's session's run info (what a stored run keeps)
    n_ctx: int = -1
    pieces: list[str] = field(default_factory=list)  # each scored position's true next token

    @property
    def kl_ms_per_position(self) -> float:
        """The per-position cost of the comparison (log-softmax of both rows and the KL over
        the vocabulary), measured in the setting's run, outside its decode brackets."""
        f = self.setting.forced
        return f.probe_ns / 1e6 / f.n_positions if f.n_positions else -1.0

    @property
    def speedup(self) -> float:
        return self.setting.tok_s.estimate / self.reference.tok_s.estimate

    def to_dict(self) -> dict[str, object]:
        def arm(a: ArmRun) -> dict[str, object]:
            iv = a.tok_s
            return {"settings": a.settings, "tok_s": [iv.estimate, iv.low, iv.high],
                    "decode_seconds": a.forced.decode_seconds, "decodes": a.forced.decodes,
                    "read_bytes": a.forced.read_bytes, "hit_rate": a.forced.hit_rate}

        return {"text": self.text_name, "n_text_tokens": self.n_text_tokens,
                "n_scored": self.n_scored, "mode": self.mode, "notes": self.notes,
                "setting": arm(self.setting), "reference": arm(self.reference),
                "kl_ms_per_position": self.kl_ms_per_position, "speedup": self.speedup,
                "quality": self.figures.to_dict()}

    # ---- the scored run as a stored run (save_scored_run) ------------------------------------

    def quality_record(self) -> dict[str, object]:
        """What the store keeps of the comparison (Run.quality): the figures with their
        intervals, the reference's settings, and the per-position series the compare table
        bootstraps and the KL lane plots (QUALITY_SERIES names them)."""
        s = self.series
        return {"text": self.text_name, "mode": self.mode, "n_text_tokens": self.n_text_tokens,
                "reference": self.reference.settings, "speedup": self.speedup,
                "tok_s_reference": list(_triple(self.reference.tok_s)),
                "kl_ms_per_position": self.kl_ms_per_position,
                "figures": self.figures.to_dict(),
                "series": {"kl": s.kl.tolist(), "nll": s.nll_setting.tolist(),
                           "nll_reference": s.nll_reference.tolist(),
                           "agree_pct": (100.0 * ~s.flipped).tolist()}}

    def token_rows(self) -> list[TokenMetrics]:
        """One row per scored position, as a generated token's: its decode time (the KL work
        is outside it) and its expert reads; what scoring does not probe stays unmeasured."""
        f = self.setting.forced
        reads = f.position_read_bytes or [-1] * len(f.decode_ms)
        targets = self.series.target.tolist()
        return [TokenMetrics(step=i + 1, steps=len(f.decode_ms), turn=0, wall_ms=ms,
                             cpu_ms=UNMEASURED, majflt=-1, majflt_mib=UNMEASURED,
                             loop_overhead_ms=UNMEASURED, read_bytes=read,
                             token_id=targets[i] if i < len(targets) else -1,
                             piece=self.pieces[i] if i < len(self.pieces) else "")
                for i, (ms, read) in enumerate(zip(f.decode_ms, reads, strict=True))]

    def run_summary(self) -> RunSummary:
        f = self.setting.forced
        return RunSummary(
            turn=0, n_generated=f.n_positions, gen_seconds=f.decode_seconds, n_prompt=0,
            n_reused=f.n_reused, n_past=f.n_positions + f.n_reused, n_ctx=self.n_ctx,
            load_seconds=UNMEASURED, prefill_seconds=UNMEASURED, ttft_seconds=UNMEASURED,
            majflt_per_token=UNMEASURED, cpu_s_per_token=UNMEASURED,
            loop_overhead_s_per_token=UNMEASURED, stop_reason="length",
            moe_read_mib=f.read_bytes / (1 << 20) if f.read_bytes >= 0 else UNMEASURED,
            cache_hit_pct=f.hit_rate)


def _triple(iv: Interval) -> tuple[float, float, float]:
    return iv.estimate, iv.low, iv.high


SCORED_LABEL = "score"


def save_scored_run(store, report: QualityReport, *, label: str = SCORED_LABEL) -> int:
    """Record a scored run in `store` (a workbench.store.Store; this layer does not import it):
    a headless run with one token row per position, its summary and its quality figures, so the
    Runs page, `runs list` and the compare view show it beside any other run. Returns its id."""
    if report.info is None:
        raise ValueError("the report has no run info: it was not made by score_text")
    run = store.create_run(report.info, summary=report.run_summary(), label=label)
    store.add_token_rows(run.id, report.token_rows())
    store.set_quality(run.id, report.quality_record())
    return int(run.id)


class _ReferenceRows:
    """The reference's logits, one float32 row per position, in a temporary file (1,000
    positions of a 256k vocabulary are 1 GiB: too much to hold in memory beside a model)."""

    def __init__(self, n: int, folder: str) -> None:
        self._n, self._path = n, Path(folder) / "reference.npy"
        self.rows: np.ndarray | None = None

    def put(self, i: int, logits: np.ndarray) -> None:
        if self.rows is None:  # sized by the first row: the vocabulary as the model scores it
            self.rows = np.lib.format.open_memmap(self._path, mode="w+", dtype=np.float32,
                                                  shape=(self._n, logits.size))
        self.rows[i] = logits

    def row(self, i: int) -> np.ndarray:
        assert self.rows is not None
        return self.rows[i]


def score_text(setting: Config, text: str, *, text_name: str = "text",
               max_tokens: int | None = None, batched: int = 0, streamed_reference: bool = False,
               progress: Progress | None = None, stop: threading.Event | None = None,
               warm_dir: Path | None = None) -> QualityReport:
    """Score `text` under `setting` against its lossless reference. Runs on the benches' engine
    thread (bench/engine.py); raises QualityError or SessionError. `warm_dir`: the setting's
    session warm-starts its expert cache from there, as `chat` and the window do (the reference
    never does: it is read whole)."""
    if batched > 1 and (why := batch_refusal(setting)):
        raise QualityError(f"batched scoring refused: {why}")
    setting = for_scoring(setting)
    reference = reference_config(setting, streamed=streamed_reference)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="workbench-quality-") as folder:
        with opened(reference) as session:
            tokens, n_text = on_engine(lambda: _tokens(session, text, max_tokens, notes))
            pieces = on_engine(lambda: session.pieces(tokens[1:]))  # the scored targets
            n = len(tokens) - 1
            rows = _ReferenceRows(n, folder)
            ref_run = _read(session, "reference", tokens, rows.put, batched, progress, stop)
        builder = SeriesBuilder()

        def compare(i: int, logits: np.ndarray) -> None:
            builder.add(tokens[i + 1], log_softmax(rows.row(i)), log_softmax(logits))

        with opened(setting, warm_dir=warm_dir) as session:
            info, n_ctx = session.run_info, session.n_ctx
            set_run = _read(session, "setting", tokens, compare, batched, progress, stop)
            if setting.spec != "off" and batched <= 1:
                mode = "speculative (drafts verified against the text)"
            else:
                mode = f"batched ({batched} positions per decode)" if batched > 1 else \
                    "one token per decode"
    series = builder.build()
    return QualityReport(
        text_name=text_name, n_text_tokens=n_text, n_scored=series.n, notes=notes, mode=mode,
        setting=ArmRun("setting", setting.diff_from_defaults(), set_run),
        reference=ArmRun("reference", reference.diff_from_defaults(), ref_run),
        series=series, figures=figures(series), info=info, n_ctx=n_ctx, pieces=pieces,
    )


def _tokens(session: Session, text: str, max_tokens: int | None, notes: list[str]
            ) -> tuple[list[int], int]:
    """The text's tokens cut to the context (and to `max_tokens` scored positions)."""
    tokens = session.tokenize(text)
    n_text = len(tokens)
    if n_text < 2:
        raise QualityError("the text is a single token: there is nothing to score")
    limit = session.n_ctx  # positions 0 .. n_ctx - 1 are read; the last token is only a target
    if max_tokens is not None:
        limit = min(limit, max_tokens)
    if n_text - 1 > limit:
        cut_by = "the context" if limit == session.n_ctx else "--tokens"
        notes.append(f"the text is {n_text} tokens; scoring its first {limit} positions "
                     f"(cut to {cut_by}: {limit} tokens)")
        tokens = tokens[: limit + 1]
    return tokens, n_text


def _read(session: Session, phase: str, tokens: list[int],
          on_row: Callable[[int, np.ndarray], None], batched: int, progress: Progress | None,
          stop: threading.Event | None) -> ForcedRun:
    total = len(tokens) - 1
    every = max(1, total // 100)

    def on_logits(i: int, logits: np.ndarray) -> None:
        on_row(i, logits)
        if progress is not None and (i % every == 0 or i == total - 1):
            progress(phase, i + 1, total)
        if stop is not None and stop.is_set():
            session.cancel()

    run = on_engine(lambda: session.teacher_force(tokens, on_logits, batch=batched))
    if run.error:
        raise QualityError(f"the {phase} run failed: {run.error}")
    if run.stopped:
        raise QualityError(f"scoring was stopped during the {phase} run")
    return run
