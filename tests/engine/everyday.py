"""A small evaluation of everyday questions for the default chat model (issue #29).

A new user's first turns are facts, how-tos and short explanations. An answer passes when it
does not loop (no run of words comes back again and again, no line repeats) and it is on topic
(every keyword group of its question is met by at least one word). The bundled model's defaults
(workbench/engine/model_defaults.py) were chosen with this; tests/engine/test_default_answers.py
keeps them to it, and shows the generic defaults failing it.

Run the comparison of candidate defaults that chose them (at normal priority; it prints a table):

    .venv/bin/python -m tests.engine.everyday [--n-predict 80] [--seeds 3]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    kind: str  # "fact", "how-to" or "explain"
    # Every group must be met by one of its words (lower case, as a word prefix: "scatter"
    # meets "scattering").
    keywords: tuple[tuple[str, ...], ...]


QUESTIONS: tuple[Question, ...] = (
    Question("What is the capital of France?", "fact", (("paris",),)),
    Question("Who wrote Romeo and Juliet?", "fact", (("shakespeare",),)),
    Question("How many days are there in a week?", "fact", (("seven", "7"),)),
    Question("How do I boil an egg?", "how-to", (("water",), ("minute", "boil"))),
    Question("How do I make a cup of tea?", "how-to", (("tea",), ("water", "boil", "kettle"))),
    Question("Why is the sky blue?", "explain", (("light", "sunlight"), ("scatter", "rayleigh"))),
    Question("What is photosynthesis? Explain briefly.", "explain",
             (("plant",), ("light", "sun"))),
)

LOOP_NGRAM = 4  # words in a run that must not come back...
LOOP_REPEATS = 3  # ...this many times in one short answer
_WORD = re.compile(r"[\w']+", re.UNICODE)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def loop_found(text: str, n: int = LOOP_NGRAM, repeats: int = LOOP_REPEATS) -> str:
    """What repeats ("" when nothing does): a run of `n` words or a non-empty line that
    occurs `repeats` times or more."""
    ws = words(text)
    grams = Counter(tuple(ws[i:i + n]) for i in range(len(ws) - n + 1))
    gram, count = grams.most_common(1)[0] if grams else ((), 0)
    if count >= repeats:
        return f"{' '.join(gram)!r} × {count}"
    lines = Counter(ln.strip().lower() for ln in text.splitlines() if ln.strip())
    line, count = lines.most_common(1)[0] if lines else ("", 0)
    if count >= repeats:
        return f"line {line!r} × {count}"
    return ""


def missing_keywords(question: Question, text: str) -> list[tuple[str, ...]]:
    ws = words(text)
    return [group for group in question.keywords
            if not any(w.startswith(k) for w in ws for k in group)]


@dataclass(slots=True)
class Verdict:
    question: Question
    answer: str
    loop: str
    missing: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.loop and not self.missing and bool(self.answer.strip())

    def why(self) -> str:
        if self.ok:
            return "ok"
        parts = []
        if not self.answer.strip():
            parts.append("empty answer")
        if self.loop:
            parts.append(f"loops: {self.loop}")
        if self.missing:
            parts.append("off topic: none of " + "; ".join("/".join(g) for g in self.missing))
        return ", ".join(parts)


def judge(question: Question, answer: str) -> Verdict:
    return Verdict(question, answer, loop_found(answer), missing_keywords(question, answer))


def ask_all(session, questions: Iterable[Question], n_predict: int,
            settings=None) -> list[Verdict]:
    """Each question as the first turn of a new chat, with `settings` (a TurnSettings; None:
    the session's)."""
    from workbench.engine.requests import GenerateRequest

    verdicts = []
    for q in questions:
        result = session.generate(GenerateRequest(text=q.text, new_chat=True, settings=settings,
                                                  n_predict=n_predict))
        assert result.ok or result.stop_reason == "length", result.error
        verdicts.append(judge(q, result.text))
    return verdicts


def report(verdicts: Sequence[Verdict]) -> str:
    return "\n".join(f"  {'PASS' if v.ok else 'FAIL'} {v.question.text!r}: {v.why()}\n"
                     f"       {v.answer[:160]!r}" for v in verdicts)


# -- the comparison that chose the defaults ----------------------------------------------------

SYSTEM = "You are a helpful assistant. Answer the question directly and briefly, in English."
CANDIDATES: dict[str, dict[str, object]] = {
    "generic defaults (greedy, no system prompt)": {},
    "greedy + system prompt": {"system_prompt": SYSTEM},
    "greedy + repetition penalty 1.1": {"repeat_penalty": 1.1},
    "greedy + system prompt + penalty 1.1": {"system_prompt": SYSTEM, "repeat_penalty": 1.1},
    "temp 0.2 top-p 0.9 + system prompt": {"system_prompt": SYSTEM, "temp": 0.2, "top_p": 0.9},
    "temp 0.2 top-p 0.9 + system prompt + penalty 1.1": {
        "system_prompt": SYSTEM, "temp": 0.2, "top_p": 0.9, "repeat_penalty": 1.1},
    "temp 0.7 + system prompt + penalty 1.1": {
        "system_prompt": SYSTEM, "temp": 0.7, "repeat_penalty": 1.1},
}


def main(argv: list[str] | None = None) -> int:
    from workbench.config import Config
    from workbench.embedded import chat_model_path
    from workbench.engine.model_defaults import BUNDLED_SETTINGS
    from workbench.engine.session import Session
    from workbench.engine.turn_settings import TurnSettings

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-predict", type=int, default=80)
    ap.add_argument("--seeds", type=int, default=3, help="seeds per sampled candidate")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="", help="run only candidates whose name has this")
    args = ap.parse_args(argv)
    candidates = {**CANDIDATES, "chosen (model_defaults.BUNDLED_SETTINGS)": BUNDLED_SETTINGS}
    session = Session.open(Config(model=str(chat_model_path()), n_threads=args.threads,
                                  n_ctx=1024))
    rows = []
    try:
        for name, changes in candidates.items():
            if args.only and args.only not in name:
                continue
            base = Config(model=session.config.model, n_threads=args.threads, n_ctx=1024)
            cfg = base.replace(**changes)
            seeds = range(1, args.seeds + 1) if cfg.temp > 0 else [-1]
            passed = total = 0
            started = time.monotonic()
            for seed in seeds:
                verdicts = ask_all(session, QUESTIONS, args.n_predict,
                                   TurnSettings.of(cfg.replace(seed=seed)))
                passed += sum(v.ok for v in verdicts)
                total += len(verdicts)
                print(f"{name} (seed {seed}):\n{report(verdicts)}", flush=True)
            rows.append((name, passed, total, time.monotonic() - started))
    finally:
        session.close()
    print(f"\n{'candidate':<52} passed  seconds   (n_predict {args.n_predict})")
    for name, passed, total, seconds in rows:
        print(f"{name:<52} {passed:>2}/{total:<3} {seconds:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
