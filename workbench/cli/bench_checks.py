"""Every `bench` subcommand's arguments, checked as `chat` checks its own: before any model is
generated or loaded, a bad value is one line naming the flag and the range, and exit 2.

The numeric flags the benches share have one rule each, declared once here and bounded by the
setting they feed where there is one (threads by n_threads, lanes by io_threads, tokens by
n_predict, MiB by the machine's memory); the settings flags go through `config.validate`, as
`chat`'s do; a model or draft model given by path must be a whole GGUF (a regular file: a FIFO
is refused before it is opened), a streamed bench's a MoE, and a draft model must share the
model's vocabulary, all read from the headers alone.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.config import BY_NAME, MEMORY_MIB, Config, validate
from workbench.file_kind import not_regular

MAX_REPEATS = 10_000
MAX_GIB = 1024.0


@dataclass(frozen=True, slots=True)
class Bound:
    """A numeric flag's range, inclusive."""

    flag: str
    low: float
    high: float
    what: str

    def problem(self, value: object) -> str | None:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and math.isfinite(value) and self.low <= value <= self.high:  # type: ignore[arg-type]
            return None
        high = "" if self.high == math.inf else f" to {self.high:g}"
        return f"{self.flag} must be {self.what} {self.low:g}{high} (got {value})"


def _setting(name: str, flag: str) -> Bound:
    s = BY_NAME[name]
    return Bound(flag, float(s.min if s.min is not None else 0),
                 float(s.max if s.max is not None else math.inf), "a whole number from")


# argparse `dest` -> its rule; a subcommand is checked for the ones it has.
BOUNDS: dict[str, Bound] = {
    "repeats": Bound("--repeats", 1, MAX_REPEATS, "a whole number from"),
    "warmup": Bound("--warmup", 0, MAX_REPEATS, "a whole number from"),
    "tokens": _setting("n_predict", "-n/--tokens"),
    "threads": _setting("n_threads", "-t/--threads"),
    "lanes": _setting("io_threads", "--lanes"),
    "history_tokens": _setting("n_ctx", "--history-tokens"),
    "leave_mib": Bound("--leave-mib", 0, MEMORY_MIB, "MiB from"),
    "floor_mb": Bound("--floor-mb", 0, MEMORY_MIB, "MiB from"),
    "cache_mb": Bound("--cache-mb", 0, MEMORY_MIB, "MiB from"),
    "gib": Bound("--gib", 0.001, MAX_GIB, "GiB from"),
    "trim": Bound("--trim", 0, BY_NAME["n_predict"].max or math.inf, "a whole number from"),
}
# Comma-separated choices: argparse `dest` -> the names it may hold.
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("stream", "which"): ("machinery", "memory", "io", "load", "threads", "routing"),
    ("policy", "skip"): ("prefetch", "io"),
}
# Comma-separated numbers: (bench, argparse `dest`) -> the rule each item follows.
LISTS: dict[tuple[str, str], Bound] = {
    ("threads", "cache_mbs"): BOUNDS["cache_mb"],
    ("threads", "counts"): _setting("n_threads", "--counts"),
}
STREAMED = ("stream", "drop", "policy", "threads", "curve")  # benches whose model must be a MoE


def number_list(text: str) -> list[int]:
    """A comma-separated list of whole numbers; ValueError names the item that is not one."""
    out = []
    for item in (i.strip() for i in text.split(",")):
        if item:
            try:
                out.append(int(item))
            except ValueError:
                raise ValueError(f"{item!r} is not a whole number") from None
    return out


def _list_problems(args: argparse.Namespace, kind: str) -> list[str]:
    out = []
    for (bench, dest), bound in LISTS.items():
        if kind != bench or not hasattr(args, dest):
            continue
        flag = bound.flag
        try:
            items = number_list(str(getattr(args, dest)))
        except ValueError as exc:
            out.append(f"{flag}: {exc} (comma-separated, e.g. 1,2,4)")
            continue
        out += [p for item in items if (p := bound.problem(item)) is not None]
    return out


def problems(args: argparse.Namespace) -> list[str]:
    """Every problem with a bench's arguments (empty when it may run), reading only headers."""
    out = [p for dest, bound in BOUNDS.items()
           if not isinstance(getattr(args, dest, False), bool)  # matrix's --no-warmup: a switch
           and (p := bound.problem(getattr(args, dest))) is not None]
    kind = getattr(args, "bench", "")
    for (bench, dest), names in CHOICES.items():
        if kind == bench and hasattr(args, dest):
            given = [n.strip() for n in str(getattr(args, dest)).split(",") if n.strip()]
            unknown = [n for n in given if n not in names]
            if unknown:
                out.append(f"--{dest}: unknown {unknown[0]!r}; choose from {', '.join(names)}")
            elif dest != "skip" and not given:
                out.append(f"--{dest} needs at least one of {', '.join(names)}")
    out += _list_problems(args, kind)
    if out:
        return out
    return _model_problems(args, kind)


def _model_problems(args: argparse.Namespace, kind: str) -> list[str]:
    from workbench.engine.model_load import check_draft_model
    from workbench.engine.requests import SessionError
    from workbench.moe.layout import ModelFileError, read_model_facts

    typed = {s: getattr(args, s) for s in BY_NAME if hasattr(args, s)}
    if not isinstance(typed.get("model", ""), str):  # a streamed bench's own -m (a Path)
        del typed["model"]
    config = Config().replace(**typed)
    found = [p.message for p in validate(config)]  # the settings flags, as chat checks them
    if found:
        return found
    for name in ("chat_template_file", "mmproj"):  # read at load: a FIFO would block it forever
        if what := not_regular(getattr(config, name)) if getattr(config, name) else "":
            return [f"{BY_NAME[name].flags[0]}: {getattr(config, name)} is {what}, not a file"]
    if getattr(args, "drafter", "") == "draft" and not config.spec_draft_model:
        return ["--drafter draft needs --spec-draft-model PATH (a small GGUF with the model's "
                "vocabulary), or use --drafter ngram"]
    model = getattr(args, "model", None)
    facts = None
    if model:
        try:
            facts = read_model_facts(Path(model))
        except ModelFileError as exc:
            return [f"-m/--model: {exc}"]
        if kind in STREAMED and not facts.is_moe:
            return [f"-m/--model: {Path(model).name} is not a Mixture-of-Experts model (no "
                    f"expert tensors): `bench {kind}` streams experts; leave -m out for the "
                    "generated bench model"]
    if config.spec_draft_model:
        if facts is None:  # the model the bench would use: spec's is the chat model
            from workbench.embedded import chat_model_path, gemma_model_path

            target = chat_model_path() if kind == "spec" else gemma_model_path()
            facts = read_model_facts(target)
        try:
            check_draft_model(Path(config.spec_draft_model), facts)
        except SessionError as exc:
            return [str(exc)]
    return []


def checked(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A bench's body, run only when `problems` finds none; otherwise each is one line on
    stderr and the exit status is 2, before anything is generated or loaded."""

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        found = problems(args)
        for line in found:
            print(f"error: {line}", file=sys.stderr)
        return 2 if found else run(args)

    return wrapper
