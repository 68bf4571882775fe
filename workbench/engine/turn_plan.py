"""How one turn decodes, decided before it runs: its tool calls, its constrained picks and its
speculator. A grammar (a response format's, the tools' or the answer format's) decides whether
drafts may be verified, so the three are chosen together, once, and settled together after the
turn."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workbench.engine.answer_format import with_answer_format
from workbench.engine.constrain import TurnPicks
from workbench.engine.model_load import ModelParts
from workbench.engine.requests import SPEC_GREEDY_ONLY, GenerateRequest, GenerateResult
from workbench.engine.speculation.speculator import Speculator, speculator_for
from workbench.engine.token_choice import TokenChoice
from workbench.engine.tools.turn import ToolTurn
from workbench.engine.turn_settings import TurnSettings


@dataclass(slots=True)
class TurnPlan:
    calls: ToolTurn | None  # None: the turn may call no tool
    picks: TurnPicks | None  # None: plain sampling (no grammar, no logprobs)
    speculator: Speculator | None
    spec_note: str  # the summary's `spec`: the drafter's kind, or why it is off

    @classmethod
    def of(cls, parts: ModelParts, settings: TurnSettings, request: GenerateRequest, *,
           sampling: bool) -> TurnPlan:
        """GrammarError or SchemaError when the request's grammar cannot be built."""
        assert parts.model is not None and parts.ctx is not None
        calls = ToolTurn.of(request.tools, parts.template, request.raw)
        decoding = calls.decoding(request.decoding) if calls else with_answer_format(
            request.decoding, settings.answer_format, settings.answer_schema)
        picks = TurnPicks.for_turn(parts.model, parts.ctx, settings, decoding)
        speculator, note = speculator_for(
            settings.spec, settings.spec_draft_max, sampling, parts.drafter, parts.model.is_eog,
            picks.spec_off_reason if picks else "")
        return cls(calls, picks, speculator, note)

    @property
    def last_choice(self) -> Callable[[], TokenChoice | None]:
        """The last pick's choice (its log-probabilities), or always None without picks."""
        return (lambda: None) if self.picks is None else self.picks.last_choice

    @property
    def grammar_ms(self) -> Callable[[], float] | None:
        """The last pick's grammar time, or None: no grammar runs this turn."""
        picks = self.picks
        return picks.last_grammar_ms if picks is not None and picks.constrained else None

    def settle(self, result: GenerateResult) -> None:
        """After the turn ran (or failed): the picks' figures into the summary, their grammar
        freed, the speculation note, and the answer's tool calls read out of its text."""
        if self.picks is not None:
            if result.summary is not None:
                self.picks.fill_summary(result.summary)
        elif self.spec_note.startswith("off:"):
            result.notes.append(SPEC_GREEDY_ONLY)
        if self.calls is not None:
            self.calls.read(result)

    def close(self) -> None:
        if self.picks is not None:
            self.picks.close()

    def keep(self, result: GenerateResult) -> None:
        """After the conversation took the turn: its calls join the history's answer."""
        if self.calls is not None:
            self.calls.keep(result)
