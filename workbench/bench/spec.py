"""`bench spec`: speculative decoding against plain greedy decoding, side by side.

One session, two arms that differ only in the `spec` setting (a request setting, so the same
loaded model and context serve both), run in alternating order (AB, BA, AB...) on each task,
each answer from a new chat. Tasks:

- `quote`: the model is asked to repeat a pasted passage word for word, so the answer is in
  the prompt and prompt lookup should hit;
- `code`: the model is asked to repeat a function with repeated identifiers;
- `free`: an open question whose answer is not in the prompt, so drafts should miss and the
  speculation must turn itself down (DraftPolicy) rather than cost time.

The rate is the user's: generated tokens over the generation's whole wall (every decode and
everything between them, drafting included), not the decode-only `tok/s` of the summary, which
would not bill the drafting. The ratio is spec over plain with a 95 % paired bootstrap
interval over the repeats (workbench/bench/stats.py). `identical` compares the token ids of
the two arms in every repeat. With `--moe` the same is done on a streamed synthetic MoE with
its expert cache off (every routed expert is read), to say what a verify batch costs in I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.bench.stats import Interval, paired_ratio_ci
from workbench.config import Config
from workbench.engine.metrics import RunSummary
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.engine.turn_settings import TurnSettings

Log = Callable[[str], None]

PASSAGE = (
    "The lighthouse stood at the end of a long spit of rock, and for forty years the same family "
    "had kept its lamp. Every evening the keeper climbed the one hundred and twelve steps, "
    "trimmed the wick, polished the great lens and wound the clockwork that turned it. Ships "
    "that passed in the night saw the beam sweep the water every ten seconds and knew where the "
    "reef lay. When the light was finally automated, the keeper's daughter wrote down "
    "everything her father had taught her, so that nobody would forget how it was done."
)
CODE = (
    "def total_price(items, tax_rate):\n"
    "    subtotal = 0\n"
    "    for item in items:\n"
    "        subtotal = subtotal + item.price * item.quantity\n"
    "    tax = subtotal * tax_rate\n"
    "    total = subtotal + tax\n"
    "    return total\n"
)
TASKS: dict[str, str] = {
    "quote": f"Repeat the following passage word for word, without any comment:\n\n{PASSAGE}",
    "code": f"Repeat this Python function exactly as it is, in a code block:\n\n{CODE}",
    "free": "Write a short story about a fox who learns to play the violin.",
}


@dataclass(slots=True)
class Arm:
    seconds: list[float] = field(default_factory=list)  # generation wall per repeat
    tokens: list[list[int]] = field(default_factory=list)
    summaries: list[RunSummary] = field(default_factory=list)


@dataclass(slots=True)
class TaskResult:
    task: str
    plain: Arm
    spec: Arm

    @property
    def identical(self) -> bool:
        return self.plain.tokens == self.spec.tokens

    def ratio(self) -> Interval:
        # Rate ratio spec/plain = (n_s / t_s) / (n_p / t_p); per repeat n_s == n_p when the
        # answers are identical, so it is the paired ratio of plain time over spec time,
        # weighted by tokens so unequal answers still compare rates.
        num = [len(t) / s for t, s in zip(self.spec.tokens, self.spec.seconds, strict=True)]
        den = [len(t) / s for t, s in zip(self.plain.tokens, self.plain.seconds, strict=True)]
        return paired_ratio_ci(num, den)

    def accept_pct(self) -> float:
        drafted = sum(max(0, s.spec_drafted) for s in self.spec.summaries)
        kept = sum(max(0, s.spec_accepted) for s in self.spec.summaries)
        return 100.0 * kept / drafted if drafted else -1.0

    def tokens_per_decode(self) -> float:
        decodes = sum(max(0, s.spec_decodes) for s in self.spec.summaries)
        return sum(s.n_generated for s in self.spec.summaries) / decodes if decodes else -1.0

    def read_mib_per_token(self, arm: Arm) -> float:
        n = sum(s.n_generated for s in arm.summaries)
        mib = sum(s.moe_read_mib for s in arm.summaries)
        return mib / n if n and mib >= 0 else -1.0

    def routed_per_token(self, arm: Arm) -> float:
        n = sum(s.n_generated for s in arm.summaries)
        routed = sum(s.experts_routed for s in arm.summaries)
        return routed / n if n and routed >= 0 else -1.0

    def line(self) -> str:
        r = self.ratio()
        accept = self.accept_pct()
        return (f"{self.task}: spec ratio tok/s={r.estimate:.2f} [{r.low:.2f}, {r.high:.2f}] "
                f"accept={accept:.1f}% tok/decode={self.tokens_per_decode():.2f} "
                f"identical={'yes' if self.identical else 'NO'} "
                f"(plain {_rate(self.plain):.1f} tok/s, spec {_rate(self.spec):.1f} tok/s, "
                f"{len(self.plain.seconds)} repeats)")

    def io_line(self) -> str:
        p, s = self.read_mib_per_token(self.plain), self.read_mib_per_token(self.spec)
        rp, rs = self.routed_per_token(self.plain), self.routed_per_token(self.spec)
        return (f"{self.task}: expert reads MiB/token plain={p:.3f} spec={s:.3f} "
                f"(spec/plain {s / p if p > 0 else -1:.2f}); routed slots/token plain={rp:.1f} "
                f"spec={rs:.1f}")


def _rate(arm: Arm) -> float:
    seconds = sum(arm.seconds)
    return sum(len(t) for t in arm.tokens) / seconds if seconds > 0 else -1.0


def generation_seconds(summary: RunSummary) -> float:
    """The generation's whole wall: decodes plus everything between them (drafting too)."""
    return summary.gen_seconds + summary.loop_overhead_s_per_token * summary.n_generated


def run_task(session: Session, task: str, prompt: str, *, spec: str, repeats: int, log: Log
             ) -> TaskResult:
    base = TurnSettings.of(session.config)
    arms = {"off": Arm(), spec: Arm()}
    for i in range(repeats + 1):  # repeat 0 warms both arms up and is not counted
        order = ["off", spec] if i % 2 == 0 else [spec, "off"]
        for mode in order:
            result = session.generate(GenerateRequest(text=prompt, new_chat=True,
                                                      settings=base.replace(spec=mode)))
            if not result.ok:
                raise RuntimeError(f"bench spec: the {mode} arm failed: {result.error}")
            summary = result.summary
            assert summary is not None
            if i == 0:
                continue
            arm = arms[mode]
            arm.seconds.append(generation_seconds(summary))
            arm.tokens.append(list(session.kv_tokens[-summary.n_generated:]))
            arm.summaries.append(summary)
            log(f"  {task} repeat {i} {mode}: {summary.n_generated} tokens in "
                f"{generation_seconds(summary):.3f} s, drafted {summary.spec_drafted}, kept "
                f"{summary.spec_accepted}")
    return TaskResult(task, arms["off"], arms[spec])


def spec_bench(config: Config, *, tasks: list[str], spec: str, repeats: int, log: Log
               ) -> list[TaskResult]:
    with Session.open(config) as session:
        return [run_task(session, t, TASKS[t], spec=spec, repeats=repeats, log=log)
                for t in tasks]


def moe_io_bench(model: Path, *, repeats: int, n_tokens: int, threads: int, log: Log
                 ) -> TaskResult:
    """Speculation on a streamed MoE with the expert cache off: every verify batch reads the
    union of the experts its tokens route to. The synthetic MoE writes noise (prompt lookup
    rarely hits), so it drafts for itself: a best case for acceptance, which isolates what
    batching does to the reads."""
    config = Config(model=str(model), chat_template=False, n_predict=n_tokens, n_ctx=512,
                    n_threads=threads, moe_stream=True, cache_mb=0, spec_draft_model=str(model))
    with Session.open(config) as session:
        return run_task(session, "moe", "a b c d e f a b c d e f", spec="draft",
                        repeats=repeats, log=log)
