"""A chat session over one loaded model: multi-turn, KV reuse, cancel, honest per-token telemetry.

The session is used from one thread, the one that opened it (the engine thread,
engine/engine_thread.py): every other thread's call raises WrongThreadError, so a split
arrangement (two OpenMP pools fighting over the cores) cannot come back unseen. Only `cancel()`
may be called from any thread. It owns the model's lifecycle, the settings in force and the
conversation; each turn's prefill and decode loop is `turn_loop.py`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from workbench.backend.grammar import GrammarError, SchemaError
from workbench.config import Config, signature, validate
from workbench.engine.chat.formats import PLAIN, detect_reasoning_format
from workbench.engine.chat.history import history_after_turn
from workbench.engine.chat.reasoning import ContinueError
from workbench.engine.chat.think import ThinkControl
from workbench.engine.conversation_memory import ConversationMemory
from workbench.engine.engine_thread import ThreadOwner, WrongThreadError
from workbench.engine.images import (
    ImageInput,
    ImageInputError,
    ImageTurnStats,
    check_image,
    kv_cells,
)
from workbench.engine.kv_pool import KvPool, make_pool
from workbench.engine.metrics import UNMEASURED, RunInfo
from workbench.engine.model_load import ModelParts, check_openable, load_parts, read_template_file
from workbench.engine.model_setup import build_run_info
from workbench.engine.probes import MemoryProbe
from workbench.engine.prompt import Message, Prompt
from workbench.engine.requests import (
    Forecast,
    GenerateRequest,
    GenerateResult,
    SessionError,
    StopReason,
    context_overflow,
    refusal,
    rejected,
)
from workbench.engine.sampling import SamplerChain
from workbench.engine.scoring import ForcedRun, OnLogits, forced_parts, teacher_force, token_pieces
from workbench.engine.sinks import Sink
from workbench.engine.streaming import StreamingRuntime
from workbench.engine.thread_choice import ThreadChoice
from workbench.engine.tools.formats import ToolFormat, detect_tool_format
from workbench.engine.turn_loop import OnPrefill, OnToken, Turn, TurnLoop, TurnParts
from workbench.engine.turn_plan import TurnPlan
from workbench.engine.turn_settings import SESSION_WIDE, TurnSettings
from workbench.moe.layout import ModelFacts
from workbench.moe.projector import ProjectorFacts
from workbench.moe.streamer import StreamerError

# check_openable and read_template_file live in model_load.py; named here for their callers.
__all__ = ["Session", "SessionError", "WrongThreadError", "check_openable", "read_template_file"]


class Session:
    """Owns one model, one context and the conversation it holds."""

    def __init__(self) -> None:  # use Session.open()
        self.config: Config
        self.facts: ModelFacts
        self.run_info: RunInfo
        self.think_control = ThinkControl.TEMPLATE
        self.template_origin = "none (raw text)"
        self.load_seconds = 0.0
        self._p = ModelParts()  # model, context, streamer, template... (model_load.py)
        self._chain = SamplerChain(0)  # the sampling chain, keyed by each turn's settings
        self.projector_facts: ProjectorFacts | None = None
        self._images: dict[str, ImageInput] = {}  # every image the conversation refers to
        self._kv_dir: Path | None = None
        self.image_encodes = 0  # images encoded by this session (the reuse tests read it)
        self._sink: Sink | None = None
        self._memory = MemoryProbe()
        self._cancel = threading.Event()
        self._busy = threading.Lock()  # held by generate(); close() takes it too
        self._thread = ThreadOwner("Session")  # the thread that opened it; checked on every call
        self._turn_index = 0
        self._run_info_sent = False
        self._held: ConversationMemory | None = None  # conversations' KV states (after open)
        self.thread_choice: ThreadChoice | None = None  # how its count was decided (opening.py)

    # ---- lifecycle --------------------------------------------------------------------------

    @classmethod
    def open(cls, config: Config, *, sink: Sink | None = None,
             progress: Callable[[float], bool] | None = None, kv_dir: Path | None = None,
             record_routes: bool = False, max_route_loads: int | None = None,
             warm_dir: Path | None = None, record_route_scores: bool = False) -> Session:
        """Validate, load the model and create the context. Raises SessionError.

        `progress` gets the load fraction and may return False to cancel the load.
        `kv_dir` is where conversations' KV states are kept across restarts (None: memory only).
        `record_routes` keeps every turn's routing as RouteLoads (`streaming.routes`; the last
        `max_route_loads` layer loads, None: all) for route traces, the cache-sizing view, the
        benches and the gates. It drains the streamer's records after each decode, so read them
        there. `record_route_scores` also keeps each load's score row (`RouteLoad.scores`).
        `warm_dir` keeps each streamed model's routing frequencies for the expert cache's warm
        start (`engine/warm_start.py`; None: no warm start, nothing saved).
        """
        started = time.perf_counter()
        path, facts = check_openable(config)
        self = cls()  # records the calling thread as the session's engine thread
        self._sink = sink
        self.facts = facts
        self.config = config.replace(model=str(path))
        try:
            routes = (record_routes, max_route_loads, record_route_scores)
            self._p = parts = load_parts(self.config, facts, path, progress, routes, warm_dir)
        except BaseException:
            self._memory.close()
            raise
        self.template_origin, self.think_control = parts.template_origin, parts.think_control
        self.projector_facts = parts.projector_facts
        assert self._p.model is not None
        self._chain = SamplerChain(self._p.model.n_vocab)
        self.load_seconds = time.perf_counter() - started
        self.run_info = build_run_info(path, self._p.model, self.facts, self.config,
                                       self._p.template is not None,
                                       self._p.resolved_settings(self.config))
        self._kv_dir = kv_dir  # kept: raising kv_disk_mb from 0 later makes the spill then
        assert self._p.ctx is not None and self._p.kv is not None
        self._held = ConversationMemory(self._p.ctx, self._p.kv,
                                        make_pool(self.config, self.run_info, kv_dir))
        return self

    def close(self) -> None:
        """Free everything, idempotently, in model_load.ModelParts.close's order, after the
        conversations' KV states went to the disk spill (a restart restores them). Only the
        opening thread may close: from another it raises WrongThreadError and frees nothing."""
        self._thread.check("close")
        self.cancel()
        with self._busy:
            if self._p.ctx is not None and self._held is not None:
                self._held.close()
            self._free()

    def _free(self) -> None:
        self._chain.close()
        self._p.close()
        self._p = ModelParts()
        self._memory.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def thread_id(self) -> int:
        """`threading.get_ident()` of the session's engine thread (the one that opened it)."""
        return self._thread.ident

    def take_thread(self) -> None:
        """Make the calling thread the engine thread (only bench stream's split arrangement)."""
        self._thread.take()

    # ---- state and settings -----------------------------------------------------------------

    @property
    def chat_mode(self) -> bool:
        return self._p.template is not None

    @property
    def reasons(self) -> bool:
        """The chat template marks reasoning (else the model cannot think: issue 39)."""
        return detect_reasoning_format(self._p.template) is not PLAIN

    @property
    def tool_format(self) -> ToolFormat:
        """How this model writes tool calls (from its chat template; generic without one)."""
        return detect_tool_format(self._p.template.source if self._p.template else None)

    @property
    def n_ctx(self) -> int:
        return self._p.ctx.n_ctx if self._p.ctx else 0

    @property
    def kv_tokens(self) -> list[int]:
        """Exactly the tokens the KV memory holds, in order."""
        return self._p.kv.tokens if self._p.kv else []

    @property
    def kv_cells(self) -> int:
        """KV cells in use: tokens plus M-RoPE images' extra embeddings (the context gauge)."""
        if self._p.kv is None:
            return 0
        extra = self._p.prompts.extra_cells if self._p.prompts is not None else {}
        return kv_cells(self._p.kv.tokens, extra)

    @property
    def sees_images(self) -> bool:
        """An image projector is loaded: messages may carry images."""
        return self._p.projector is not None

    @property
    def streaming(self) -> StreamingRuntime | None:
        return self._p.streaming

    @property
    def warnings(self) -> list[str]:
        """Things the user should know about this session's settings (e.g. the cache cliff)."""
        return self._p.warnings(self.n_ctx)

    def set_session_settings(self, config: Config) -> None:
        """Adopt `config`'s session-wide settings (turn_settings.SESSION_WIDE: the conversation
        memory's budgets); load-time ones need a new session (config.signature)."""
        self._thread.check("set_session_settings")
        if signature(config.replace(model=self.config.model)) != signature(self.config):
            raise SessionError("load-time settings changed: open a new session to apply them")
        problems = validate(config)
        if problems:
            raise SessionError("; ".join(p.message for p in problems))
        wide = {name: getattr(config, name) for name in SESSION_WIDE}
        self.config = self.config.replace(**wide)
        self.run_info.settings.update(wide)
        assert self._held is not None
        self._held.set_budgets(self.config, self.run_info, self._kv_dir)

    def run_info_for(self, settings: TurnSettings) -> RunInfo:
        """The run info of a turn run with `settings` (what a run record says it ran with)."""
        return replace(self.run_info, settings={**self.run_info.settings, **settings.to_dict()})

    def set_threads(self, n: int) -> None:
        """Compute on `n` threads from the next decode on (the opening's measured choice)."""
        self._thread.check("set_threads")
        assert self._p.ctx is not None
        self._p.ctx.set_n_threads(n)
        self.config = self.config.replace(n_threads=n)
        self.run_info.settings["n_threads"] = n

    def set_cache_budget_mib(self, mib: float) -> None:
        """Resize the expert cache of an open session (between generations)."""
        self._thread.check("set_cache_budget_mib")
        if self._p.streaming is None:
            raise SessionError("this session does not stream experts")
        try:
            self._p.streaming.set_budget_mib(mib)
        except StreamerError as exc:
            raise SessionError(str(exc)) from exc

    def reset_conversation(self) -> None:
        """New chat: forget the KV state and the images seen (the sampler restarts its seed)."""
        self._thread.check("reset_conversation")
        self._images.clear()
        if self._held is not None:
            self._held.clear_context()
        self._chain.reset()

    # ---- generation -------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the generation within one decode step (or the next one); from any thread."""
        self._cancel.set()
        if self._p.abort is not None:
            self._p.abort.set()

    @contextmanager
    def _one_call(self, name: str) -> Iterator[None]:
        """A generation or forced read: on the engine thread, one at a time; a cancel is spent
        by the call it stopped (one made just before the call started stops it)."""
        self._thread.check(name)
        with self._busy:
            try:
                yield
            finally:
                self._cancel.clear()
                if self._p.abort is not None:
                    self._p.abort.clear()

    def generate(self, request: GenerateRequest, on_token: OnToken | None = None,
                 on_prefill: OnPrefill | None = None) -> GenerateResult:
        """One turn, as `request` states it."""
        with self._one_call("generate"):
            result = self._generate(request, on_token, on_prefill)
            if not result.history:  # refused before its turn ran: the conversation stands
                result.history = request.history
            return result

    def _generate(self, request: GenerateRequest, on_token: OnToken | None,
                  on_prefill: OnPrefill | None) -> GenerateResult:
        if self._p.kv is None or self._p.prompts is None:
            return GenerateResult(ok=False, stop_reason=StopReason.ERROR,
                                  error="The model was closed: open it again to continue.")
        started_ns = time.perf_counter_ns()
        if self._sink is not None and not self._run_info_sent:
            self._sink.on_run_info(self.run_info)
            self._run_info_sent = True
        if request.new_chat:
            self.reset_conversation()
        failed = self._p.streaming.failed if self._p.streaming is not None else ""
        refused = refusal(request, self.config, streaming_failed=failed,
                          sees_images=self.sees_images)
        if refused is not None:
            return refused
        settings = request.turn_settings(TurnSettings.of(self.config))
        try:
            for image in request.images:
                check_image(image)
            self._images.update((image.sha256, image) for image in request.history_images)
            prompt = request.prompt(self._p.prompts, settings, self._images)
            self._p.prompts.extend(prompt, request.continue_from, request.continue_reasoning)
        except ImageInputError as exc:
            return rejected(f"{exc}. The message was not sent; nothing was lost.")
        except ContinueError as exc:
            prompt.close()
            return rejected(f"This answer cannot be continued: {exc}. It is unchanged; "
                             "Regenerate makes a new version of it.")
        try:
            return self._run(request, settings, prompt, settings.n_predict, started_ns,
                             on_token, on_prefill)
        finally:
            prompt.close()

    def _run(self, request: GenerateRequest, settings: TurnSettings, prompt: Prompt,
             n_predict: int, started_ns: int, on_token: OnToken | None,
             on_prefill: OnPrefill | None) -> GenerateResult:
        assert self._p.kv is not None and self._p.model is not None and self._p.ctx is not None
        if (overflow := context_overflow(prompt.kv_cells, n_predict, self.n_ctx)) is not None:
            return overflow
        turn = Turn(index=self._turn_index, prompt=prompt, n_predict=n_predict,
                    started_ns=started_ns, stop=request.stop, settings=settings.recorded())
        if self._p.streaming is not None:
            self._p.streaming.begin_turn(turn.index, request.conversation)
        assert self._held is not None
        turn.restored, turn.restore_seconds = self._held.switch_to(request.conversation)
        reprefill_reason = self._held.reprefill_reason(prompt.text, self._p.template)
        kept = self._p.kv.reuse_prefix(prompt.tokens)
        turn.n_common = self._p.kv.truncate(prompt.whole_images_below(kept))
        if self._p.projector is not None:
            turn.images = ImageTurnStats.zero()
            turn.images.n_images = len(prompt.images)
        self._chain.for_turn(settings, prompt.tokens[len(prompt.tokens) - prompt.n_continued:])
        try:
            plan = TurnPlan.of(self._p, settings, request, sampling=self._chain.current is not None)
        except (GrammarError, SchemaError) as exc:
            return rejected(f"{exc}. Nothing was generated.")
        try:
            result = self._turn_loop(plan).run(turn, on_token, on_prefill)
            plan.settle(result)
        finally:
            plan.close()
        self.image_encodes += max(0, turn.images.n_encoded)
        if result.ok and not result.stopped:
            self._images.update((image.sha256, image) for image in request.images)
        if result.summary is not None:
            self._held.count_prefill(result.summary.n_prompt, result.summary.prefill_seconds)
        self._after_turn(turn, result, request.history)
        plan.keep(result)
        result.notes.extend(prompt.notes)
        result.reprefill_reason = reprefill_reason
        self._turn_index += 1
        return result

    def teacher_force(self, tokens: list[int], on_logits: OnLogits, *, first: int = 0,
                      batch: int = 1) -> ForcedRun:
        """Read `tokens` as given (quality scoring, engine/scoring.py): each position's logits
        go to `on_logits`. The conversation in the context steps aside first (to the pool);
        afterwards the memory holds the text, owned by no conversation. Speculates as a greedy
        turn would when the settings say so (not in batched mode)."""
        with self._one_call("teacher_force"):
            assert self._held is not None
            self._held.switch_to(None)
            self._held.kv_text = ""
            return teacher_force(forced_parts(self._p, self.config, self._cancel, batch),
                                 tokens, on_logits, first=first, batch=batch)

    def pieces(self, tokens: list[int]) -> list[str]:
        """Each token's text in sequence, as generation gives it (scoring.token_pieces)."""
        self._thread.check("pieces")
        assert self._p.model is not None
        return token_pieces(self._p.model, tokens)

    def tokenize(self, text: str, *, bos: bool = True) -> list[int]:
        """`text` as the model's tokens, plain text (special tokens are not parsed)."""
        self._thread.check("tokenize")
        assert self._p.model is not None
        return self._p.model.tokenize(text, add_special=bos, parse_special=False)

    def _turn_loop(self, plan: TurnPlan) -> TurnLoop:
        picks = plan.picks
        return TurnLoop(TurnParts.lent(
            self._p, self._cancel, self._memory, self.load_seconds, self._sink,
            pick_token=self._pick_token if picks is None else picks.pick_token,
            pick_row=self._pick_row, speculator=plan.speculator, spec_note=plan.spec_note,
            last_choice=plan.last_choice, grammar_ms=plan.grammar_ms))

    def _pick_row(self, row: int) -> int:
        """The greedy pick from row `row` of a verify batch (tests wrap this, as _pick_token)."""
        assert self._p.ctx is not None
        return self._p.ctx.argmax_ith(row)

    def _pick_token(self) -> int:
        """Greedy argmax, or the sampling chain when temperature > 0 (tests wrap this)."""
        ctx = self._p.ctx
        assert ctx is not None
        sampler = self._chain.current
        return sampler.sample(ctx) if sampler is not None else ctx.argmax()

    # ---- conversations: one in the context, the others kept aside (conversation_memory.py) --

    def forget_conversation(self, conversation: str) -> None:
        """A deleted conversation: none of its state is kept, in memory, on disk or in context."""
        self._thread.check("forget_conversation")
        if self._held is not None:
            self._held.forget(conversation)

    def forecast(self, request: GenerateRequest) -> Forecast:
        """What `request` would cost to read as its turn would count it, changing nothing."""
        self._thread.check("forecast")
        assert self._p.prompts is not None and self._held is not None
        settings = request.turn_settings(TurnSettings.of(self.config))
        try:
            table = {**self._images, **{i.sha256: i for i in request.history_images}}
            prompt = request.prompt(self._p.prompts, settings, table)
        except ImageInputError:
            return Forecast(0, 0, UNMEASURED)
        prompt.close()
        return self._held.forecast(request.conversation, prompt, self._p.prompts.extra_cells,
                                   self.n_ctx, settings.n_predict)

    @property
    def kv_pool(self) -> KvPool:
        assert self._held is not None
        return self._held.pool

    @property
    def kv_owner(self) -> str | None:
        return self._held.owner if self._held is not None else None

    def _after_turn(self, turn: Turn, result: GenerateResult,
                    history: tuple[Message, ...]) -> None:
        """What a finished turn changes in the conversation; an unfinished one changes none."""
        assert self._held is not None
        self._held.after_turn(result.stop_reason, turn.prompt.text + turn.generated_text,
                              bool(result.reasoning))
        finished = result.ok and not result.stopped
        result.history = history_after_turn(history, turn.prompt.user_message, result.reasoning,
                                            result.text, self._p.template, finished=finished)
