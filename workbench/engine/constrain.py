"""How one turn picks its tokens beyond the session's sampler: a grammar, log-probabilities.

`Decoding` is a small frozen value a `GenerateRequest` carries (its `decoding` field)
(the server builds it from `response_format`, `grammar`, `logprobs`). A turn with one runs on a
`backend.grammar.Picker` made from the session's settings in force, for that turn only: nothing
of it stays in the session. Each picked token's `TokenChoice` (its log-probability and the top
alternatives, from the distribution it was drawn from after the same filters) travels with its
`TokenEvent`; the grammar's time per token goes to the token's row (`grammar_ms`), outside the
decode bracket.

Speculative decoding is off for such a turn, with the reason in the summary's `spec`: its verify
step compares plain argmaxes, which neither a grammar's mask nor a per-token distribution
survives.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.backend import llama
from workbench.backend.grammar import ChainSettings, Pick, Picker
from workbench.engine.metrics import RunSummary
from workbench.engine.token_choice import TokenChoice
from workbench.engine.turn_settings import TurnSettings

NO_LOGPROBS = -1


@dataclass(frozen=True, slots=True)
class Decoding:
    grammar: str = ""  # GBNF the answer must match ("" none): backend.grammar.schema_to_gbnf
    grammar_root: str = "root"
    # Lazy: the grammar holds only once the generated text matches one of these patterns
    # (whole, as llama.cpp's lazy grammar; fed from the first capture group on: Picker).
    # Empty: from the start.
    triggers: tuple[str, ...] = ()
    # -1: none; 0: each token's own log-probability; n > 0: plus the n likeliest alternatives.
    logprobs: int = NO_LOGPROBS

    @property
    def active(self) -> bool:
        return bool(self.grammar) or self.logprobs >= 0

    @property
    def spec_off_reason(self) -> str:
        """The summary's `spec` word when speculation would otherwise run."""
        return "off: grammar" if self.grammar else "off: logprobs"


class TurnPicks:
    """One turn's token picks under a `Decoding`: the picker, made from the settings in force,
    and what the last pick chose from."""

    def __init__(self, model: llama.Model, ctx: llama.Context, picker: Picker,
                 decoding: Decoding) -> None:
        self._model, self._ctx, self._picker = model, ctx, picker
        self.decoding = decoding
        self._last: TokenChoice | None = None

    @property
    def spec_off_reason(self) -> str:
        return self.decoding.spec_off_reason

    @classmethod
    def for_turn(cls, model: llama.Model, ctx: llama.Context, settings: TurnSettings,
                 decoding: Decoding | None) -> TurnPicks | None:
        """The picks of a turn with `decoding` (None for a free turn); GrammarError when the
        grammar does not parse."""
        if decoding is None or not decoding.active:
            return None
        return cls.open(model, ctx, settings, decoding)

    @classmethod
    def open(cls, model: llama.Model, ctx: llama.Context, cfg: TurnSettings,
             decoding: Decoding) -> TurnPicks:
        """GrammarError when the grammar does not parse."""
        chain = ChainSettings(
            temp=cfg.temp, top_k=cfg.top_k, top_p=cfg.top_p, min_p=cfg.min_p, seed=cfg.seed,
            penalties=llama.Penalties(last_n=cfg.repeat_last_n, repeat=cfg.repeat_penalty,
                                      presence=cfg.presence_penalty,
                                      frequency=cfg.frequency_penalty))
        picker = Picker(model, chain, grammar=decoding.grammar, root=decoding.grammar_root,
                        n_top=max(0, decoding.logprobs), triggers=decoding.triggers)
        return cls(model, ctx, picker, decoding)

    def pick_token(self) -> int:
        pick = self._picker.pick(self._ctx)
        if self.decoding.logprobs >= 0:
            self._last = token_choice(self._model, pick)
        return pick.token

    def last_choice(self) -> TokenChoice | None:
        return self._last

    @property
    def constrained(self) -> bool:
        """A grammar runs (or waits for its trigger) this turn."""
        return self._picker.constrained

    def last_grammar_ms(self) -> float:
        """The grammar's time for the last pick (mask and accept, or the wait for a lazy
        grammar's trigger), in ms: the token's `grammar_ms`. The summary's `grammar_seconds`
        counts the same picks on its own (`Picker.grammar_ns`)."""
        return self._picker.last_grammar_ns / 1e6

    def fill_summary(self, summary: RunSummary) -> None:
        """The grammar's time over the turn (-1: no grammar), apart from the decode time."""
        if self.constrained:
            summary.grammar_seconds = self._picker.grammar_ns / 1e9

    def close(self) -> None:
        self._picker.close()


def token_choice(model: llama.Model, pick: Pick) -> TokenChoice:
    return TokenChoice(
        token=pick.token, piece=model.token_to_piece(pick.token), logprob=pick.logprob,
        top=tuple((a.token, model.token_to_piece(a.token), a.logprob) for a in pick.top))
