"""A small evaluation of everyday requests for the default chat model (issues #29, #39).

A new user's first turns are facts, how-tos and short explanations, and then longer pieces: a
story, a poem, a list, an answer continued past the token limit. An answer passes when it does
not loop (tests/loops.py: no run of words comes back again and again, no line repeats), it is on
topic (every keyword group of its request is met by at least one word) and, for the long-form
tasks, it is long enough to be the piece asked for. These are properties, not another machine's
words: greedy text differs between CPUs (AVX2 and AVX-512 kernels, thread counts), so nothing
here compares an answer with a recorded one.

The bundled model's defaults (workbench/engine/model_defaults.py) were chosen with this;
tests/engine/test_default_answers.py keeps them to it, and shows the old defaults failing it.

Run the comparison of candidate defaults that chose them (at normal priority; it prints a table):

    .venv/bin/python -m tests.engine.everyday [--n-predict 64] [--long-predict 256] [--seeds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tests.loops import loop_found, words


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    kind: str  # "fact", "how-to" or "explain"
    # Every group must be met by one of its words (lower case, as a word prefix: "scatter"
    # meets "scattering").
    keywords: tuple[tuple[str, ...], ...]
    # Long-form tasks: the fewest words a real answer has, and whether it is asked in two
    # halves (the second a Continue from where the token limit cut the first).
    min_words: int = 1
    continued: bool = False

    @property
    def long_form(self) -> bool:
        return self.kind in LONG_KINDS


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

LONG_KINDS = ("story", "poem", "list", "continued")
ANIMALS = ("dog", "cat", "lion", "tiger", "elephant", "horse", "cow", "bird", "fish", "bear",
           "monkey", "giraffe", "zebra", "rabbit", "wolf", "fox", "snake", "eagle", "mouse",
           "sheep", "goat", "pig", "deer", "owl", "dolphin", "whale", "shark", "duck", "frog")
LONG_TASKS: tuple[Question, ...] = (
    Question("Write a short story about a cat who finds a lost key.", "story",
             (("cat",), ("key",)), min_words=60),
    Question("Write a haiku about the moon.", "poem", (("moon",),), min_words=8),
    Question("List ten animals, one per line.", "list", (ANIMALS,), min_words=10),
    Question("Tell me a story about a dragon who learns to read.", "continued",
             (("dragon",), ("read", "book")), min_words=80, continued=True),
)

LOOP_NGRAM = 4  # words in a run that must not come back...
LOOP_REPEATS = 3  # ...this many times in one short answer
LONG_NGRAM = 6  # in a long piece a phrase of 4 may come back; one of 6, three times, loops


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
    def short(self) -> bool:
        return len(words(self.answer)) < self.question.min_words

    @property
    def ok(self) -> bool:
        return (not self.loop and not self.missing and bool(self.answer.strip())
                and not self.short)

    def why(self) -> str:
        if self.ok:
            return "ok"
        parts = []
        if not self.answer.strip():
            parts.append("empty answer")
        elif self.short:
            parts.append(f"too short: {len(words(self.answer))} words of "
                         f"{self.question.min_words}")
        if self.loop:
            parts.append(f"loops: {self.loop}")
        if self.missing:
            parts.append("off topic: none of " + "; ".join("/".join(g) for g in self.missing))
        return ", ".join(parts)


def judge(question: Question, answer: str) -> Verdict:
    n = LONG_NGRAM if question.long_form else LOOP_NGRAM
    return Verdict(question, answer, loop_found(answer, n, LOOP_REPEATS),
                   missing_keywords(question, answer))


def ask(session, question: Question, n_predict: int, settings=None) -> str:
    """`question` as the first turn of a new chat, with `settings` (None: the session's); a
    continued
    task is asked for half the tokens, then continued for the other half as the window's
    Continue does (the whole answer is judged)."""
    from workbench.engine.requests import GenerateRequest

    first = n_predict // 2 if question.continued else n_predict
    result = session.generate(GenerateRequest(text=question.text, new_chat=True,
                                              settings=settings, n_predict=first))
    assert result.ok or result.stop_reason == "length", result.error
    if question.continued and result.stop_reason == "length":
        # No turns before the question, as the window sends a first answer's Continue.
        result = session.generate(GenerateRequest(text=question.text, continue_from=result.text,
                                                  settings=settings,
                                                  n_predict=n_predict - first))
        assert result.ok or result.stop_reason == "length", result.error
    return result.text


def ask_all(session, questions: Iterable[Question], n_predict: int,
            settings=None) -> list[Verdict]:
    """Each question as the first turn of a new chat, with `settings` (a TurnSettings; None:
    the session's)."""
    return [judge(q, ask(session, q, n_predict, settings)) for q in questions]


def report(verdicts: Sequence[Verdict]) -> str:
    return "\n".join(f"  {'PASS' if v.ok else 'FAIL'} {v.question.text!r}: {v.why()}\n"
                     f"       {v.answer[:160]!r}" for v in verdicts)


# -- the comparison that chose the defaults ----------------------------------------------------

SYSTEM = "You are a helpful assistant. Answer the question directly and briefly, in English."
CANDIDATES: dict[str, dict[str, object]] = {
    "generic defaults (greedy, no system prompt)": {},
    "old defaults (greedy + system prompt)": {"system_prompt": SYSTEM},
    "greedy + repetition penalty 1.1": {"repeat_penalty": 1.1},
    "greedy + system prompt + penalty 1.1": {"system_prompt": SYSTEM, "repeat_penalty": 1.1},
    "temp 0.2 top-p 0.9 + system prompt": {"system_prompt": SYSTEM, "temp": 0.2, "top_p": 0.9},
    "temp 0.2 top-p 0.9 + system prompt + penalty 1.1": {
        "system_prompt": SYSTEM, "temp": 0.2, "top_p": 0.9, "repeat_penalty": 1.1},
    "temp 0.7 + system prompt + penalty 1.1": {
        "system_prompt": SYSTEM, "temp": 0.7, "repeat_penalty": 1.1},
    "greedy + system prompt + penalty 1.15 over 256": {
        "system_prompt": SYSTEM, "repeat_penalty": 1.15, "repeat_last_n": 256},
    "greedy + system prompt + penalty 1.3 over 256": {
        "system_prompt": SYSTEM, "repeat_penalty": 1.3, "repeat_last_n": 256},
    "greedy + system prompt + presence 0.5 frequency 0.5 over 256": {
        "system_prompt": SYSTEM, "presence_penalty": 0.5, "frequency_penalty": 0.5,
        "repeat_last_n": 256},
    "temp 0.7 min-p 0.05 + system prompt + penalty 1.1 over 256": {
        "system_prompt": SYSTEM, "temp": 0.7, "min_p": 0.05, "repeat_penalty": 1.1,
        "repeat_last_n": 256},
}
OLD_DEFAULTS = CANDIDATES["old defaults (greedy + system prompt)"]  # what issue #39 met


def evaluate(session, n_predict: int, long_predict: int, settings=None) -> list[Verdict]:
    """The whole evaluation with `settings` (None: the session's): the questions, then the
    long tasks."""
    return (ask_all(session, QUESTIONS, n_predict, settings)
            + ask_all(session, LONG_TASKS, long_predict, settings))


def main(argv: list[str] | None = None) -> int:
    from workbench.config import Config
    from workbench.embedded import chat_model_path
    from workbench.engine.model_defaults import BUNDLED_SETTINGS
    from workbench.engine.session import Session
    from workbench.engine.turn_settings import TurnSettings

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-predict", type=int, default=64, help="tokens for a question")
    ap.add_argument("--long-predict", type=int, default=256, help="tokens for a long task")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per sampled candidate")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="",
                    help="run only candidates whose name has one of these (comma-separated)")
    args = ap.parse_args(argv)
    candidates = {**CANDIDATES, "chosen (model_defaults.BUNDLED_SETTINGS)": BUNDLED_SETTINGS}
    session = Session.open(Config(model=str(chat_model_path()), n_threads=args.threads,
                                  n_ctx=1024))
    rows = []
    try:
        for name, changes in candidates.items():
            if args.only and not any(part in name for part in args.only.split(",")):
                continue
            base = Config(model=session.config.model, n_threads=args.threads, n_ctx=1024)
            cfg = base.replace(**changes)
            seeds = range(1, args.seeds + 1) if cfg.temp > 0 else [-1]
            passed = total = long_passed = long_total = 0
            started = time.monotonic()
            for seed in seeds:
                verdicts = evaluate(session, args.n_predict, args.long_predict,
                                    TurnSettings.of(cfg.replace(seed=seed)))
                short = [v for v in verdicts if not v.question.long_form]
                long = [v for v in verdicts if v.question.long_form]
                passed += sum(v.ok for v in short)
                total += len(short)
                long_passed += sum(v.ok for v in long)
                long_total += len(long)
                print(f"{name} (seed {seed}):\n{report(verdicts)}", flush=True)
            rows.append((name, passed, total, long_passed, long_total,
                         time.monotonic() - started))
    finally:
        session.close()
    print(f"\n{'candidate':<62} questions  long  seconds   (n_predict {args.n_predict}, "
          f"long {args.long_predict})")
    for name, passed, total, long_passed, long_total, seconds in rows:
        print(f"{name:<62} {passed:>3}/{total:<4} {long_passed:>3}/{long_total:<3} "
              f"{seconds:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
