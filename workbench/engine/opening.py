"""What a model opens with: the one place that decides it, for the window, `chat` and `serve`.

A model's settings come from layers, each overriding the ones before it:

1. config defaults: every setting's declared default (`config.SETTINGS`);
2. the model's defaults (`model_defaults.py`: the bundled chat model's system prompt and
   repetition penalty);
3. the model's own load-time settings: those it had the last time it was open (remembered,
   `model_settings.py`) when they still validate, else the defaults fitted to its size and
   to this machine's memory (when its header was read: the picker);
4. the window's settings (those in force, or those `window.json` kept from the last run):
   their per-request settings, which are the user's and follow from model to model, and their
   load-time ones too when they are this model's;
5. what the user typed or chose now: the command line's flags, the picker's edits.

`chat` and `serve` have no window: they open with layers 1, 2 and 5, so the same model and
flags open the same way in all three front-ends while the window has no memory.

Which settings the user chose (layer 5, and a thread count remembered as a choice) is kept
beside the config: an explicit setting always wins. The one that matters at open is the
thread count: a streamed model whose count was not chosen gets the count a short measurement
finds fastest (`settle_threads`, on the engine thread, right after the load: issue 38).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from workbench.config import SETTINGS, Config, follow_app_defaults, validate
from workbench.engine import thread_choice
from workbench.engine.model_defaults import model_defaults
from workbench.engine.model_settings import LOAD_KEYS, describe, fit_reply, fitted
from workbench.engine.scoring import ForcedRun, OnLogits
from workbench.engine.thread_choice import ThreadChoice
from workbench.engine.wait_policy import usable_cores
from workbench.moe.layout import ModelFacts

REQUEST_KEYS: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.scope == "request")
# The measurement at open: this text, teacher-forced (no sampling, nothing kept), a few tokens
# per candidate count, in alternating rounds (thread_choice.measure).
PROBE_TEXT = ("The thread count is measured at open: a few tokens are decoded at each "
              "candidate count, and the fastest is kept for this model, cache and disk.")
PROBE_TOKENS = 6
PROBE_ROUNDS = 2


@dataclass(frozen=True, slots=True)
class Opening:
    config: Config  # what the model opens with (its projector set by the caller), before fit_reply
    explicit: frozenset[str] = frozenset()  # settings the user chose: these always win
    remembered: bool = False  # layer 3 was the model's own settings from the last time
    fitted_to: str = ""  # what layer 3's defaults were fitted to ("its trained context"), or ""

    @property
    def measures_threads(self) -> bool:
        """Streaming, with a thread count nobody chose: the opening measures it."""
        return self.config.moe_stream and "n_threads" not in self.explicit

    def chosen(self, edited: Config | None = None) -> Config:
        """What to load: these settings (or `edited`, as the user changed them in the picker)
        with a reply that fits the context."""
        return fit_reply(edited or self.config)[0]

    def note(self, chosen: Config | None = None) -> str:
        """For the picker: where the settings come from and what they are (`chosen`: as the
        user has edited them there), with the reply shortened to fit when it must be."""
        chosen, shortened = fit_reply(chosen or self.config)
        origin = ("Opens with its own settings from the last time" if self.remembered
                  else "Opens with defaults for this model"
                  + (f" (fitted to {self.fitted_to})" if self.fitted_to else ""))
        threads = (" The thread count is measured at open (set it to keep your own)."
                   if chosen.moe_stream and "n_threads" not in self.explicit else "")
        return " ".join(filter(None, (f"{origin}: {describe(chosen)}.{threads}", shortened)))


def decide(model: str, *, typed: Mapping[str, Any] | None = None, window: Config | None = None,
           remembered: Mapping[str, Mapping[str, Any]] | None = None,
           facts: ModelFacts | None = None, available_mib: float = -1.0) -> Opening:
    """The settings `model` opens with, from the layers in the module docstring.

    `typed`: the settings typed or chosen now (layer 5, by setting name); `window`: the
    window's settings (layer 4; None: no window, or it remembers nothing); `remembered`: each
    model's load-time settings from the last time (layer 3); `facts` and `available_mib`
    (-1: unknown) fit the defaults when nothing is remembered."""
    typed = dict(typed or {})
    model = typed.pop("model", model)
    config = model_defaults(model)  # layers 1 and 2
    own = (remembered or {}).get(model)
    values = {k: v for k, v in (own or {}).items() if k in LOAD_KEYS}
    candidate = None
    if values:  # layer 3: its own, when they still validate
        try:
            candidate = config.replace(**values)
        except (TypeError, ValueError):  # another version's entry
            candidate = None
        if candidate is not None and validate(fit_reply(candidate)[0]):
            candidate = None
    if candidate is not None:
        config, why, explicit = candidate, "", set(values)
    else:
        config, why = fitted(model, facts, config, available_mib)
        explicit = set()
    if window is not None:  # layer 4
        keys = [*REQUEST_KEYS, *(("mmproj", *LOAD_KEYS) if window.model == model else ())]
        config = config.replace(**{k: getattr(window, k) for k in keys})
    config = config.replace(model=model, **typed)  # layer 5
    return Opening(config, frozenset(explicit | set(typed)), candidate is not None, why)


def with_offer(config: Config, offer: Mapping[str, Any]) -> Config:
    """`config` with an offer taken (the picker's streaming for a model that does not fit), as
    the settings panel would take the same changes: the window's defaults follow the gates the
    offer flips (dropping at 75 % once streaming has a cache: config.follow_app_defaults)."""
    return follow_app_defaults(config, config.replace(**offer)) if offer else config


class Measurable(Protocol):
    """What `settle_threads` uses of an open session (engine/session.py's Session)."""

    config: Config
    thread_choice: ThreadChoice | None

    def set_threads(self, n: int) -> None: ...
    def tokenize(self, text: str, *, bos: bool = True) -> list[int]: ...
    def teacher_force(self, tokens: list[int], on_logits: OnLogits, *, first: int = 0,
                      batch: int = 1) -> ForcedRun: ...
    def reset_conversation(self) -> None: ...


def settle_threads(session: Measurable, *, measure: bool, cores: int | None = None,
                   step: Callable[[int], float] | None = None) -> ThreadChoice | None:
    """Decide the compute thread count of a just-opened session, on its engine thread.

    `measure` (Opening.measures_threads): a few tokens are decoded at each candidate count
    (thread_choice.candidates of the usable cores) and the fastest is kept; when the
    measurement fails, the recommended count (thread_choice.recommended, what `advise` says).
    Otherwise the config's count stands: an explicit one is said to be the user's; a resident
    model keeps the default unmeasured (None). The choice is the session's `thread_choice`."""
    n = session.config.n_threads
    if not measure:
        choice = (ThreadChoice(n, "set explicitly, not measured") if session.config.moe_stream
                  else None)
        session.thread_choice = choice
        return choice
    cores = cores or usable_cores()
    started = time.perf_counter()
    try:
        choice = thread_choice.probe(step or _decode_step(session), cores, PROBE_ROUNDS)
    except (RuntimeError, ValueError) as exc:
        fallback = thread_choice.recommended(cores)
        choice = ThreadChoice(fallback, f"recommended for {cores} cores; the measurement "
                              f"failed ({exc})", time.perf_counter() - started)
    session.set_threads(choice.threads)
    session.reset_conversation()  # the probe's text is nobody's conversation
    session.thread_choice = choice
    return choice


def _decode_step(session: Measurable) -> Callable[[int], float]:
    """step(threads) -> seconds per token, decoding PROBE_TOKENS of the probe text (their
    expert reads, when streaming, as a generated token's)."""
    tokens = session.tokenize(PROBE_TEXT)[: PROBE_TOKENS + 1]
    if len(tokens) < 2:
        raise ValueError("the probe text is too short in this model's tokens")

    def step(threads: int) -> float:
        session.set_threads(threads)
        run = session.teacher_force(tokens, lambda _i, _row: None)
        if run.error or run.stopped or not run.decode_ms:
            raise RuntimeError(run.error or "the decode was stopped")
        return run.decode_seconds / len(run.decode_ms)

    return step
