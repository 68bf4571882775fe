"""Multiple-choice questions scored by log-probability, under a setting and under its lossless
reference: accuracy for each, the questions that flipped each way, and McNemar's exact test.

A question file is JSONL, one object a line: {"question": str, "choices": [str, ...],
"answer": int (0-based) | "B" (a letter) | the text of the right choice}. Each question is put
to the model as

    Question: ...
    A. first choice
    B. second choice
    Answer:

and the model's answer is the choice whose continuation it finds likeliest: " A", " B", ... by
letter (the default), or " " + the choice's text by text (mean log-probability per token, so a
long choice is not penalised for its length). Every continuation is read teacher-forced, one
token per decode (engine/scoring.py), the prompt's memory shared by its choices.

The bundled set (resources/quality/choices.jsonl) is a smoke test of the plumbing, written for the
workbench: its few dozen questions cannot rank settings. docs/quality.md says how to point the
command at a real benchmark file.
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.bench.engine import on_engine, opened
from workbench.bench.quality import QualityError, for_scoring, read_text, reference_config
from workbench.bench.quality_stats import log_softmax
from workbench.bench.stats import Interval, moving_block_bootstrap
from workbench.config import Config
from workbench.engine.metrics import UNMEASURED, RunInfo, RunSummary
from workbench.engine.session import Session
from workbench.paths import resources_dir

LETTERS = string.ascii_uppercase
MAX_CHOICES = len(LETTERS)


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    choices: tuple[str, ...]
    answer: int  # index into choices
    line: int  # 1-based line of the file

    def prompt(self) -> str:
        rows = [f"Question: {self.question}"]
        rows += [f"{LETTERS[i]}. {c}" for i, c in enumerate(self.choices)]
        return "\n".join(rows) + "\nAnswer:"

    def continuations(self, by: str) -> list[str]:
        if by == "letter":
            return [f" {LETTERS[i]}" for i in range(len(self.choices))]
        return [f" {c}" for c in self.choices]


def default_choices_path() -> Path:
    return resources_dir() / "quality" / "choices.jsonl"


def parse_questions(text: str, name: str = "the question file") -> list[Question]:
    """Every question of a JSONL text; QualityError names the first bad line and what is wrong."""
    out: list[Question] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{name} line {n}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise QualityError(f"{where} is not JSON: {exc.msg}") from exc
        if not isinstance(obj, dict):
            raise QualityError(f"{where} is not an object with question, choices and answer")
        q, choices, answer = obj.get("question"), obj.get("choices"), obj.get("answer")
        if not isinstance(q, str) or not q.strip():
            raise QualityError(f"{where}: \"question\" must be non-empty text")
        if (not isinstance(choices, list) or not 2 <= len(choices) <= MAX_CHOICES
                or not all(isinstance(c, str) and c.strip() for c in choices)):
            raise QualityError(f"{where}: \"choices\" must be a list of 2 to {MAX_CHOICES} "
                               "non-empty texts")
        out.append(Question(q, tuple(choices), _answer_index(answer, choices, where), n))
    if not out:
        raise QualityError(f"{name} holds no questions")
    return out


def _answer_index(answer: object, choices: list[str], where: str) -> int:
    if isinstance(answer, bool):
        pass  # a bool is an int to Python, never an answer
    elif isinstance(answer, int) and 0 <= answer < len(choices):
        return answer
    elif isinstance(answer, str):
        if len(answer) == 1 and answer.upper() in LETTERS[: len(choices)]:
            return LETTERS.index(answer.upper())
        if answer in choices:
            return choices.index(answer)
    raise QualityError(f"{where}: \"answer\" must be a choice's 0-based index, its letter (A-"
                       f"{LETTERS[len(choices) - 1]}) or its text; got {answer!r}")


def read_questions(path: Path) -> list[Question]:
    return parse_questions(read_text(path), path.name)


def mcnemar_exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b and c discordant pairs (a binomial test of
    min(b, c) in b + c trials at one half); 1 when no pair is discordant."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass(slots=True)
class ArmAnswers:
    """One arm's picks and the log-probability of every choice of every question."""

    picks: list[int] = field(default_factory=list)
    scores: list[list[float]] = field(default_factory=list)
    positions: int = 0  # continuation positions decoded (the prompts' excluded)
    decode_seconds: float = 0.0


@dataclass(slots=True)
class ChoicesReport:
    name: str
    by: str
    questions: list[Question]
    setting: ArmAnswers
    reference: ArmAnswers
    setting_settings: dict[str, object]
    reference_settings: dict[str, object] = field(default_factory=dict)
    info: RunInfo | None = None  # the setting's session's run info (what a stored run keeps)
    n_ctx: int = -1

    def correct(self, arm: ArmAnswers) -> np.ndarray:
        return np.array([p == q.answer for p, q in zip(arm.picks, self.questions, strict=True)])

    def accuracy(self, arm: ArmAnswers) -> Interval:
        # Questions are independent: blocks of one.
        return moving_block_bootstrap(self.correct(arm).astype(float), block=1)

    @property
    def lost(self) -> list[int]:
        """Lines of the questions the reference got right and the setting wrong."""
        s, r = self.correct(self.setting), self.correct(self.reference)
        return [q.line for q, a, b in zip(self.questions, s, r, strict=True) if b and not a]

    @property
    def gained(self) -> list[int]:
        s, r = self.correct(self.setting), self.correct(self.reference)
        return [q.line for q, a, b in zip(self.questions, s, r, strict=True) if a and not b]

    @property
    def p_value(self) -> float:
        return mcnemar_exact_p(len(self.lost), len(self.gained))

    def to_dict(self) -> dict[str, object]:
        acc_s, acc_r = self.accuracy(self.setting), self.accuracy(self.reference)
        return {"file": self.name, "by": self.by, "n_questions": len(self.questions),
                "settings": self.setting_settings,
                "accuracy_setting": [acc_s.estimate, acc_s.low, acc_s.high],
                "accuracy_reference": [acc_r.estimate, acc_r.low, acc_r.high],
                "lost_lines": self.lost, "gained_lines": self.gained,
                "mcnemar_p": self.p_value}

    def choices_record(self) -> dict[str, object]:
        """What the store keeps of the comparison (Run.quality["choices"]; a choices run has
        no "figures", so nothing reads it as a scored text)."""
        return {"choices": {**self.to_dict(), "reference": self.reference_settings}}

    def run_summary(self) -> RunSummary:
        """The setting's read as a run: its continuation positions decoded and their time."""
        a = self.setting
        return RunSummary(
            turn=0, n_generated=a.positions, gen_seconds=a.decode_seconds, n_prompt=0,
            n_reused=0, n_past=0, n_ctx=self.n_ctx, load_seconds=UNMEASURED,
            prefill_seconds=UNMEASURED, ttft_seconds=UNMEASURED, majflt_per_token=UNMEASURED,
            cpu_s_per_token=UNMEASURED, loop_overhead_s_per_token=UNMEASURED,
            stop_reason="length")

    def lines(self) -> list[str]:
        n = len(self.questions)
        acc_s, acc_r = self.accuracy(self.setting), self.accuracy(self.reference)

        def pct(iv: Interval) -> str:
            return f"{100 * iv.estimate:.1f} % [{100 * iv.low:.1f}, {100 * iv.high:.1f}]"

        settings = ", ".join(f"{k}={v}" for k, v in self.setting_settings.items()
                             if k != "model") or "defaults"
        return [
            f"questions: {self.name}, {n} scored by {self.by}",
            f"setting: {settings}",
            f"accuracy setting     {pct(acc_s)}",
            f"accuracy reference   {pct(acc_r)}",
            f"flipped: {len(self.lost)} right -> wrong (lines {_lines(self.lost)}), "
            f"{len(self.gained)} wrong -> right (lines {_lines(self.gained)})",
            f"McNemar exact p = {self.p_value:.4g}"
            + ("  (no question flipped)" if not self.lost and not self.gained else ""),
        ]


def _lines(xs: list[int]) -> str:
    return ", ".join(map(str, xs[:20])) + (" ..." if len(xs) > 20 else "") if xs else "none"


Progress = Callable[[str, int, int], None]


def score_choices(setting: Config, questions: list[Question], *, name: str = "questions",
                  by: str = "letter", progress: Progress | None = None) -> ChoicesReport:
    """Answer every question under the lossless reference, then under `setting`."""
    if by not in ("letter", "text"):
        raise QualityError(f"score choices by letter or text, not {by!r}")
    setting = for_scoring(setting)
    reference = reference_config(setting)
    arms = []
    for phase, cfg in (("reference", reference), ("setting", setting)):
        with opened(cfg) as session:
            info, n_ctx = session.run_info, session.n_ctx
            arms.append(on_engine(lambda s=session, p=phase: _answer_all(s, questions, by, p,
                                                                          progress)))
    return ChoicesReport(name, by, questions, arms[1], arms[0], setting.diff_from_defaults(),
                         reference.diff_from_defaults(), info, n_ctx)


CHOICES_LABEL = "choices"


def save_choices_run(store, report: ChoicesReport) -> int:
    """Record a choices run in `store` (a workbench.store.Store; this layer does not import it):
    a headless run with its summary and the accuracies, flips and McNemar p. Returns its id."""
    if report.info is None:
        raise ValueError("the report has no run info: it was not made by score_choices")
    run = store.create_run(report.info, summary=report.run_summary(), label=CHOICES_LABEL)
    store.set_quality(run.id, report.choices_record())
    return int(run.id)


def _answer_all(session: Session, questions: list[Question], by: str, phase: str,
                progress: Progress | None) -> ArmAnswers:
    arm = ArmAnswers()
    for k, q in enumerate(questions):
        prompt = session.tokenize(q.prompt())
        scores = []
        for cont in q.continuations(by):
            target = session.tokenize(cont, bos=False)
            tokens = prompt + target
            if len(tokens) > session.n_ctx:
                raise QualityError(f"question on line {q.line} needs {len(tokens)} tokens, more "
                                   f"than the context of {session.n_ctx}: raise --n-ctx")
            logps: list[float] = []

            def on_logits(i: int, logits: np.ndarray, t=tokens, acc=logps) -> None:
                acc.append(float(log_softmax(logits)[t[i + 1]]))

            run = session.teacher_force(tokens, on_logits, first=len(prompt) - 1)
            if run.error or run.stopped:
                raise QualityError(f"the {phase} run failed at line {q.line}: "
                                   f"{run.error or 'stopped'}")
            arm.positions += run.n_positions
            arm.decode_seconds += run.decode_seconds
            scores.append(sum(logps) if by == "letter" else sum(logps) / len(logps))
        arm.scores.append(scores)
        arm.picks.append(int(np.argmax(scores)))
        if progress is not None:
            progress(phase, k + 1, len(questions))
    return arm


def stored_choices_line(quality: object) -> str:
    """A stored run's choices result in one line ("" for any other run, or a damaged record):
    the accuracies with intervals, the flips each way and McNemar's p."""
    rec = quality.get("choices") if isinstance(quality, dict) else None
    if not isinstance(rec, dict):
        return ""
    try:
        acc_s, acc_r = (Interval(*map(float, rec[k])) for k in ("accuracy_setting",
                                                                 "accuracy_reference"))
        lost, gained = len(rec["lost_lines"]), len(rec["gained_lines"])
        p, n = float(rec["mcnemar_p"]), int(rec["n_questions"])
    except (KeyError, TypeError, ValueError):
        return ""

    def pct(iv: Interval) -> str:
        return f"{100 * iv.estimate:.1f} % [{100 * iv.low:.1f}, {100 * iv.high:.1f}]"

    return (f"{rec.get('file', '?')}, {n} questions: accuracy {pct(acc_s)} vs reference "
            f"{pct(acc_r)}; {lost} right->wrong, {gained} wrong->right; McNemar p={p:.3g}")
