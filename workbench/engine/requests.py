"""What a caller asks of a session, and what it gets back."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from workbench.config import Config
from workbench.engine.constrain import Decoding
from workbench.engine.images import ImageInput
from workbench.engine.metrics import RunSummary, TokenMetrics
from workbench.engine.prompt import Message, Prompt, PromptBuilder
from workbench.engine.token_choice import TokenChoice
from workbench.engine.tools.calls import ToolCall, ToolCalling
from workbench.engine.turn_settings import TurnSettings


class SessionError(RuntimeError):
    """A session could not open or change; the message says what happened and what to do."""


@dataclass(frozen=True, slots=True)
class Forecast:
    """What sending a draft would cost before its first token, from the KV state kept for its
    conversation and this session's measured prefill rate."""

    n_prompt: int  # tokens of the whole prompt the draft makes
    n_reused: int  # of those, already held (in the context or kept for the conversation)
    seconds: float  # expected prefill time; -1 until this session has measured a rate
    n_ctx: int = 0  # the context the prompt and the reply must fit in together; 0: not known
    n_predict: int = 0  # the tokens the reply may take

    @property
    def n_to_process(self) -> int:
        return self.n_prompt - self.n_reused

    @property
    def fits(self) -> bool:
        """Whether sending it would be accepted: prompt plus reply within the context (the
        turn refuses it otherwise, after the user pressed Send)."""
        return self.n_ctx <= 0 or self.n_prompt + self.n_predict <= self.n_ctx


class StopReason(StrEnum):
    EOS = "eos"  # the model ended its turn
    LENGTH = "length"  # tokens-to-generate reached
    STOPPED = "stopped"  # the user cancelled
    ERROR = "error"  # a decode failed
    REJECTED = "rejected"  # refused before any decode (empty prompt, context overflow)


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """One turn, as a value: the message, the conversation before it and the settings it runs
    with. The session keeps no conversation of its own (only the KV state of the ones it has
    seen); a new request field is one line here, read by `Session.generate`."""

    text: str
    # The complete turns before `text` (user/assistant messages, as `GenerateResult.history`
    # gives them back), and the images those messages refer to (Message["images"]).
    history: tuple[Message, ...] = ()
    history_images: tuple[ImageInput, ...] = ()
    # The turn's sampling, tokens, thinking, system prompt and speculation (engine/
    # turn_settings.py). None: the settings the session was opened with.
    settings: TurnSettings | None = None
    n_predict: int | None = None  # None: the settings' tokens-to-generate
    think: bool | None = None  # None: the settings' thinking switch
    new_chat: bool = False  # forget the conversation (and its KV) before this turn
    # The conversation this turn belongs to (its id in the store): its KV state is kept in the
    # session's pool while others use the context. None: no pool (the CLI's one conversation).
    conversation: str | None = None
    # Continue: the answer to `text` so far (its raw text, as generated). The turn's prompt ends
    # with it and the model generates on from its end; the result's text is the whole answer.
    continue_from: str = ""
    # ...and its reasoning so far, kept apart as the store keeps it: the stream is rebuilt
    # around it, and it goes on in the reasoning block when `continue_from` is empty.
    continue_reasoning: str = ""
    # Images attached to this message (engine/images.py), shown to the model before its text.
    images: tuple[ImageInput, ...] = ()
    # The text goes to the model as is, without the chat template (the server's completions).
    raw: bool = False
    # The turn ends, as at the model's own end (StopReason.EOS), once the generated text
    # contains one of these; the text keeps it (the caller trims it).
    stop: tuple[str, ...] = ()
    # A grammar the answer must match and the log-probabilities to report (engine/constrain.py).
    # None: free text, no log-probabilities.
    decoding: Decoding | None = None
    # The tools the model may call this turn and how (engine/tools/); None: no tools. Calls
    # found in the answer come back in the result's `tool_calls`.
    tools: ToolCalling | None = None
    # The message this turn answers when it is not the user's `text`: a tool's reply (role
    # "tool", its tool_call_id; `text` is its content).
    message: Message | None = None

    def turn_settings(self, defaults: TurnSettings) -> TurnSettings:
        """What this turn runs with: its settings (else `defaults`), its overrides applied."""
        settings = self.settings or defaults
        if self.n_predict is not None:
            settings = settings.replace(n_predict=self.n_predict)
        if self.tools is not None and self.tools.calls_allowed and self.tools.forced:
            return settings.replace(think=False)  # the call's grammar holds from the first token
        return settings if self.think is None else settings.replace(think=self.think)

    def thinks(self, settings: TurnSettings) -> bool:
        """Whether its prompt opens thinking. Reasoning continued came after a prompt with
        thinking on: its continuation must too (off, some templates close the span in the
        prompt, before the reasoning goes on)."""
        return settings.think or bool(self.continue_reasoning)

    def prompt(self, prompts: PromptBuilder, settings: TurnSettings,
               table: dict[str, ImageInput]) -> Prompt:
        """Its prompt, as its turn and its forecast both read it (history, text, images, tools,
        last message, raw flag); `table` holds every image the history refers to."""
        return prompts.build(list(self.history), self.text, think=self.thinks(settings),
                             system_prompt=settings.system_prompt, images=self.images,
                             table=table, raw=self.raw, tools=self.tools, message=self.message)


@dataclass(frozen=True, slots=True)
class PrefillProgress:
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class ExpertActivity:
    """Expert routing of one generated token, for the expert activity map (streaming only).

    Rows are layer indices (up to the model's n_layer), columns expert ids. The arrays are fresh
    for each event and never written after it is sent: the UI thread may keep them.
    """

    routed: np.ndarray  # (n_layer, n_expert) uint32: routings since the previous event
    resident: np.ndarray  # (n_layer, n_expert) bool: in the expert cache after this token
    moe_layers: np.ndarray  # (n_layer,) bool: the layer's experts are streamed (else dense)
    cached: bool  # the session has an expert cache; without one `resident` is all False
    # What the cache holds per cell (moe.streamer ENTRY_*: 0 absent, 1 resident, 2 transient
    # under the token-cycle guard, 3 read ahead and not yet used); None where unknown.
    holds: np.ndarray | None = None
    policy: str = ""  # the cache's eviction policy ("" without a cache)
    # Experts substitution brought into a token's set since the previous event, per cell (uint32);
    # None while substitution is off.
    substituted: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One generated token, after its decode: its metrics and the text split so far."""

    metrics: TokenMetrics
    answer_delta: str
    reasoning_delta: str
    reset: bool  # earlier text was reclassified: replace with metrics.text / metrics.reasoning
    expert_map: ExpertActivity | None = None  # None unless the session streams experts
    choice: TokenChoice | None = None  # its log-probabilities, when the turn asked for them


@dataclass(slots=True)
class GenerateResult:
    ok: bool
    stop_reason: StopReason
    text: str = ""  # the answer (partial when stopped or failed)
    reasoning: str = ""
    error: str = ""  # what happened and what to do, when ok is False
    summary: RunSummary | None = None
    notes: list[str] = field(default_factory=list)  # e.g. a template fallback for this turn
    # Why this turn re-read part of the conversation instead of reusing the KV cache ("" when it
    # reused all it could): e.g. the template strips past reasoning.
    reprefill_reason: str = ""
    # The conversation after this turn: the request's history, plus its user message and the
    # answer when the turn completed (unchanged when it was stopped, failed or refused). The
    # next turn's request takes it as its history.
    history: tuple[Message, ...] = ()
    # The tool calls the answer made (`text` is then the text around them), and why text that
    # opened a call is not one ("": none was malformed; the text stays in `text`).
    tool_calls: tuple[ToolCall, ...] = ()
    tool_error: str = ""

    @property
    def stopped(self) -> bool:
        return self.stop_reason is StopReason.STOPPED


def rejected(message: str) -> GenerateResult:
    """A turn refused before any decode; `message` says why and what to do."""
    return GenerateResult(ok=False, stop_reason=StopReason.REJECTED, error=message)


def context_overflow(prompt_cells: int, n_predict: int, n_ctx: int) -> GenerateResult | None:
    """The refusal of a turn whose prompt and answer cannot fit the context (None: they fit).
    Counted in KV cells, not positions: an image on an M-RoPE model takes more of the first."""
    if prompt_cells + n_predict <= n_ctx:
        return None
    return rejected(
        f"The conversation needs {prompt_cells} prompt tokens plus {n_predict} tokens to "
        f"generate, which is more than the context of {n_ctx} tokens. Start a new chat, ask "
        "for fewer tokens, or reopen the model with a larger context size.")


def refusal(request: GenerateRequest, config: Config, *, streaming_failed: str,
            sees_images: bool) -> GenerateResult | None:
    """Why an open session refuses `request` before its turn runs (None: it runs). `config` is
    the session's settings, against which the request's own are checked."""
    if not request.text.strip() and request.message is None:  # a tool reply may be empty
        return rejected("The message is empty: type something to send.")
    if streaming_failed:
        return GenerateResult(ok=False, stop_reason=StopReason.ERROR,
                              error=f"{streaming_failed}. Reopen the model to continue.")
    if request.settings is not None and (problems := request.settings.problems(config)):
        return rejected("; ".join(p.message for p in problems))
    if request.images and not sees_images:
        return rejected(NO_PROJECTOR)
    return None


SPEC_GREEDY_ONLY = (
    "Speculative decoding is greedy-only (temperature 0, no penalties), so this answer was "
    "sampled token by token without it; set the temperature to 0 and the penalties off to "
    "speculate.")

NO_PROJECTOR = (
    "This model was opened without an image projector, so it cannot see images. Choose the "
    "model's mmproj file in the model picker (or pass --mmproj PROJ.gguf), then attach the "
    "image again.")
