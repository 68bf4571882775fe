"""A chat session over one loaded model: multi-turn, KV reuse, cancel, honest per-token telemetry.

The session is used from one thread, the one that opened it (the engine thread,
engine/engine_thread.py): every other thread's call raises WrongThreadError, so a split
arrangement (two OpenMP pools fighting over the cores) cannot come back unseen. Only `cancel()`
may be called from any thread. It owns the model's lifecycle, the settings in force and the
conversation; each turn's prefill and decode loop is `turn_loop.py`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from workbench.backend import llama, mtmd
from workbench.backend.abort import AbortFlag
from workbench.config import Config, signature, validate
from workbench.engine.chat.fallback import fallback_template
from workbench.engine.chat.history import assistant_history_message, find_divergence
from workbench.engine.chat.reasoning import ContinueError
from workbench.engine.chat.template import ChatTemplate
from workbench.engine.chat.think import ThinkControl, probe_think_control
from workbench.engine.engine_thread import ThreadOwner, WrongThreadError
from workbench.engine.images import (
    ImageInput,
    ImageInputError,
    ImageTurnStats,
    check_image,
    kv_cells,
)
from workbench.engine.kv_memory import KvMemory, common_prefix
from workbench.engine.kv_pool import (
    KvPool,
    PooledState,
    make_pool,
    make_spill,
    pool_budget_bytes,
)
from workbench.engine.metrics import UNMEASURED, RunInfo
from workbench.engine.model_setup import (
    build_run_info,
    default_model,
    expert_override,
    load_failure_message,
)
from workbench.engine.probes import MemoryProbe
from workbench.engine.prompt import Message, Prompt, PromptBuilder
from workbench.engine.requests import (
    Forecast,
    GenerateRequest,
    GenerateResult,
    SessionError,
    StopReason,
)
from workbench.engine.scoring import ForcedParts, ForcedRun, OnLogits, teacher_force
from workbench.engine.sinks import Sink
from workbench.engine.spec.drafters import DraftModelError, ModelDrafter, NgramDrafter
from workbench.engine.spec.speculator import Speculator
from workbench.engine.streaming import StreamingRuntime
from workbench.engine.turn_loop import OnPrefill, OnToken, Turn, TurnLoop, TurnParts
from workbench.file_kind import not_regular
from workbench.moe.layout import ModelFacts, ModelFileError, read_model_facts
from workbench.moe.lean_load import lean_load
from workbench.moe.projector import ProjectorFacts, read_projector_facts
from workbench.moe.registry import NotStreamableError
from workbench.moe.streamer import StreamerError

__all__ = ["Session", "SessionError", "WrongThreadError"]

log = logging.getLogger("workbench.session")

MIN_RATE_TOKENS = 16  # prompt tokens a turn must read to count towards the prefill rate


def check_openable(config: Config) -> tuple[Path, ModelFacts]:
    """What `Session.open` refuses before it loads anything: settings that do not validate, a
    model file that is missing or not a whole GGUF. Raises SessionError; loads nothing, so a
    caller may ask before closing the model it has open."""
    problems = validate(config)
    if problems:
        raise SessionError("; ".join(p.message for p in problems))
    path = Path(config.model) if config.model else default_model()
    try:
        return path, read_model_facts(path)
    except ModelFileError as exc:
        raise SessionError(str(exc)) from exc


class Session:
    """Owns one model, one context and the conversation it holds."""

    def __init__(self) -> None:  # use Session.open()
        self.config: Config
        self.facts: ModelFacts
        self.run_info: RunInfo
        self.think_control = ThinkControl.TEMPLATE
        self.template_origin = "none (raw text)"
        self.load_seconds = 0.0
        self.history: list[Message] = []
        self._model: llama.Model | None = None
        self._ctx: llama.Context | None = None
        self._kv: KvMemory | None = None
        self._sampler: llama.Sampler | None = None
        self._abort: AbortFlag | None = None
        self._streaming: StreamingRuntime | None = None
        self._template: ChatTemplate | None = None
        self._prompts: PromptBuilder | None = None
        self._projector: mtmd.Projector | None = None
        self.projector_facts: ProjectorFacts | None = None
        self._images: dict[str, ImageInput] = {}  # every image the conversation refers to
        self._kv_dir: Path | None = None
        self.image_encodes = 0  # images encoded by this session (the reuse tests read it)
        self._sink: Sink | None = None
        self._drafter: ModelDrafter | None = None  # the draft model (spec_draft_model)
        self._memory = MemoryProbe()
        self._cancel = threading.Event()
        self._busy = threading.Lock()  # held by generate(); close() takes it too
        self._thread = ThreadOwner("Session")  # the thread that opened it; checked on every call
        self._turn_index = 0
        self._run_info_sent = False
        self._pool = KvPool(0)
        self._owner: str | None = None  # the conversation whose KV the context holds
        self._owner_state: PooledState | None = None  # its pool entry, checked out
        self._prefilled = (0, 0.0)  # prompt tokens read and their seconds (for forecasts)
        # Text the KV memory holds after the last completed chat turn (to explain re-prefills).
        self._kv_text = ""
        self._kv_text_had_reasoning = False

    # ---- lifecycle --------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        config: Config,
        *,
        sink: Sink | None = None,
        progress: Callable[[float], bool] | None = None,
        kv_dir: Path | None = None,
        record_routes: bool = False,
        max_route_loads: int | None = None,
        warm_dir: Path | None = None,
    ) -> Session:
        """Validate, load the model and create the context. Raises SessionError.

        `progress` gets the load fraction and may return False to cancel the load.
        `kv_dir` is where conversations' KV states are kept across restarts (None: memory only).
        `record_routes` keeps every turn's routing as RouteLoads (`streaming.routes`; the last
        `max_route_loads` layer loads, None: all) for route traces, the cache-sizing view, the
        benches and the gates. It drains the streamer's records after each decode, so read them
        there, not with `ExpertStreamer.take_routes()`.
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
            self._load(path, progress, (record_routes, max_route_loads), warm_dir)
        except BaseException:
            self._free()
            raise
        self.load_seconds = time.perf_counter() - started
        self.run_info = build_run_info(path, self._model, self.facts, self.config,
                                       self._template is not None, self._resolved_settings())
        self._kv_dir = kv_dir  # kept: raising kv_disk_mb from 0 later makes the spill then
        self._pool = make_pool(self.config, self.run_info, kv_dir)
        return self

    def _load(self, path: Path, progress: Callable[[float], bool] | None,
              routes: tuple[bool, int | None] = (False, None),
              warm_dir: Path | None = None) -> None:
        cfg = self.config
        overrides = expert_override(cfg, self.facts)
        if cfg.moe_stream:
            try:
                self._streaming = StreamingRuntime(cfg, self.facts, record_routes=routes[0],
                                                   max_route_loads=routes[1], warm_dir=warm_dir)
            except (NotStreamableError, StreamerError) as exc:
                raise SessionError(str(exc)) from exc
        # Armed for the load alone: the streamer reads the experts itself, so llama.cpp need not
        # read the whole file up front.
        lean = (lean_load(self.facts.shards, self._streaming.lean_blank())
                if self._streaming is not None and cfg.lean_load else nullcontext())
        try:
            with lean as report:
                self._model = llama.Model(path, llama.ModelParams(kv_overrides_int=overrides),
                                          progress)
        except llama.LlamaError as exc:
            raise SessionError(load_failure_message(path, self.facts, str(exc))) from exc
        if self._streaming is not None:
            self._streaming.lean = report
        n_batch = min(cfg.n_batch, cfg.n_ctx)
        try:
            self._ctx = llama.Context(
                self._model,
                llama.ContextParams(
                    n_ctx=cfg.n_ctx, n_batch=n_batch, n_ubatch=min(cfg.n_ubatch, n_batch),
                    n_threads=cfg.n_threads,
                    eval_callback=self._streaming.eval_callback if self._streaming else None,
                ),
            )
        except llama.LlamaError as exc:
            raise SessionError(str(exc)) from exc
        self._kv = KvMemory(self._ctx)
        self._abort = AbortFlag()
        self._abort.install(self._ctx.ptr)
        if self._streaming is not None:
            try:
                self._streaming.attach(self._ctx, self._model, self._abort)
            except (RuntimeError, StreamerError) as exc:
                raise SessionError(f"expert streaming could not start: {exc}") from exc
        if cfg.chat_template:
            self._template = self._chat_template(path)
            self.think_control = probe_think_control(self._template)
        if cfg.mmproj:
            self._projector = self._load_projector(Path(cfg.mmproj))
        if cfg.spec_draft_model:
            try:
                self._drafter = ModelDrafter(Path(cfg.spec_draft_model), self._model,
                                             n_ctx=cfg.n_ctx, n_threads=cfg.n_threads)
            except DraftModelError as exc:
                raise SessionError(str(exc)) from exc
        self._prompts = PromptBuilder(self._model, self._template, self.think_control,
                                      self._projector)
        self._rebuild_sampler()

    def _load_projector(self, path: Path) -> mtmd.Projector:
        assert self._model is not None
        try:
            self.projector_facts = read_projector_facts(path)
        except ModelFileError as exc:
            raise SessionError(str(exc)) from exc
        try:
            return mtmd.Projector(path, self._model, self.config.n_threads)
        except mtmd.ProjectorError as exc:
            n_embd = mtmd.model_n_embd(self._model)
            width = self.projector_facts.projection_dim
            if "mismatch" in str(exc) or (width > 0 and width != n_embd):
                raise SessionError(
                    f"the image projector {path.name} does not fit this model: it makes "
                    f"embeddings {width if width > 0 else 'of another'} wide and "
                    f"{self._model.path.name} reads {n_embd}. Choose the mmproj file made for "
                    "this model (usually beside it).") from exc
            raise SessionError(f"{exc}. Choose the model's mmproj file in the model picker."
                               ) from exc

    def _chat_template(self, path: Path) -> ChatTemplate:
        model = self._model
        assert model is not None
        source = model.chat_template()
        self.template_origin = "model file"
        if self.config.chat_template_file:
            template_path = Path(self.config.chat_template_file)
            source = read_template_file(template_path)
            self.template_origin = f"file {template_path.name}"
        if not source:
            source, name = fallback_template(self.facts.arch)
            self.template_origin = f"built-in {name} (the model file has none)"
            log.info("%s has no chat template; using the built-in %s template", path.name, name)
        return ChatTemplate(source=source, bos_token=model.token_text(model.bos),
                            eos_token=model.token_text(model.eos),
                            name=f"the chat template ({self.template_origin})")

    def close(self) -> None:
        """Free everything, in order: sampler, context, streamer, abort flag, model. Idempotent.

        The streamer goes after the context (which calls into it) and before the model (whose
        tensors it rebound and now restores). Only the opening thread may close: from any other
        it raises WrongThreadError and frees nothing (a generation may be running there; cancel()
        it, then close on the session's thread). Conversations' KV states go to the disk spill
        first, so a restart restores them."""
        self._thread.check("close")
        self.cancel()
        with self._busy:
            if self._ctx is not None:
                self._leave_context()
                self._pool.close()
            self._free()

    def _free(self) -> None:
        if self._prompts is not None:
            self._prompts.close()  # its decoded images belong to the projector
        # The projector holds the model; it goes before it.
        for obj in (self._sampler, self._drafter, self._ctx, self._streaming, self._abort,
                    self._projector, self._model):
            if obj is not None:
                obj.close()
        self._sampler = self._ctx = self._streaming = self._abort = self._model = None
        self._drafter = None
        self._projector = None
        self._kv = None
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
        """Make the calling thread this session's engine thread. Only bench stream's threads arm
        uses it, to measure the split arrangement (open on one thread, generate on another) on
        purpose; every entry point opens, generates and closes on one thread."""
        self._thread.take()

    # ---- state and settings -----------------------------------------------------------------

    @property
    def chat_mode(self) -> bool:
        return self._template is not None

    @property
    def n_ctx(self) -> int:
        return self._ctx.n_ctx if self._ctx else 0

    @property
    def kv_tokens(self) -> list[int]:
        """Exactly the tokens the KV memory holds, in order."""
        return self._kv.tokens if self._kv else []

    @property
    def kv_cells(self) -> int:
        """KV cells the context uses now: its tokens, plus the embeddings M-RoPE images have
        beyond their positions (what the context gauge shows against n_ctx)."""
        if self._kv is None:
            return 0
        extra = self._prompts.extra_cells if self._prompts is not None else {}
        return kv_cells(self._kv.tokens, extra)

    @property
    def sees_images(self) -> bool:
        """An image projector is loaded: messages may carry images."""
        return self._projector is not None

    @property
    def streaming(self) -> StreamingRuntime | None:
        return self._streaming

    @property
    def warnings(self) -> list[str]:
        """Things the user should know about this session's settings (e.g. the cache cliff)."""
        out = []
        trained = self._model.n_ctx_train if self._model else 0
        if trained > 0 and self.n_ctx > trained:
            out.append(f"the context ({self.n_ctx} tokens) is longer than the {trained} this "
                       f"model was trained on: past {trained} tokens its answers may turn to "
                       f"noise; set --n-ctx {trained} or less")
        if self._streaming:
            out.extend(self._streaming.warnings)
            lean = self._streaming.lean
            if lean is not None and not lean.armed:
                out.append(lean.note)
        return out

    def apply_request_settings(self, config: Config) -> None:
        """Adopt per-request settings; load-time ones need a new session (see config.signature)."""
        self._thread.check("apply_request_settings")
        if signature(config.replace(model=self.config.model)) != signature(self.config):
            raise SessionError("load-time settings changed: open a new session to apply them")
        problems = validate(config)
        if problems:
            raise SessionError("; ".join(p.message for p in problems))
        self.config = config.replace(model=self.config.model)
        self._pool.set_budget(pool_budget_bytes(self.config.kv_pool_mb))
        if self._pool.spill is not None:
            self._pool.spill.budget_bytes = self.config.kv_disk_mb << 20
        else:  # kv_disk_mb raised from 0: the states go to disk from now on, no reopen
            self._pool.spill = make_spill(self.config, self.run_info, self._kv_dir)
        self._rebuild_sampler()
        self.run_info.settings = self._resolved_settings()
        self._run_info_sent = False

    def set_cache_budget_mib(self, mib: float) -> None:
        """Resize the expert cache of an open session (between generations)."""
        self._thread.check("set_cache_budget_mib")
        if self._streaming is None:
            raise SessionError("this session does not stream experts")
        try:
            self._streaming.set_budget_mib(mib)
        except StreamerError as exc:
            raise SessionError(str(exc)) from exc

    def set_history(self, messages: list[Message],
                    images: list[ImageInput] | None = None) -> None:
        """Replace the conversation (e.g. another branch); the matching KV prefix is kept.
        `images` are the ones its messages refer to (Message["images"])."""
        self._thread.check("set_history")
        self.history = [dict(m) for m in messages]
        for image in images or ():
            self._images[image.sha256] = image

    def reset_conversation(self) -> None:
        """New chat: forget the history and the KV state (the sampler restarts its seed)."""
        self._thread.check("reset_conversation")
        self.history.clear()
        self._images.clear()
        self._kv_text = ""
        if self._kv is not None:
            self._kv.clear()
        if self._sampler is not None:
            self._sampler.reset()

    def _rebuild_sampler(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        cfg = self.config
        penalties = llama.Penalties(last_n=cfg.repeat_last_n, repeat=cfg.repeat_penalty,
                                    presence=cfg.presence_penalty,
                                    frequency=cfg.frequency_penalty)
        # Greedy without penalties stays a bare argmax: no chain, byte-identical as before.
        if cfg.temp > 0 or penalties.active:
            self._sampler = llama.Sampler(
                temp=cfg.temp, top_k=cfg.top_k, top_p=cfg.top_p, seed=cfg.seed,
                min_p=cfg.min_p, penalties=penalties,
                n_vocab=self._model.n_vocab if self._model else 0,
            )

    def _resolved_settings(self) -> dict[str, object]:
        """Every setting as it is in force: automatic and fallback choices resolved."""
        settings = self.config.to_dict()
        if self._streaming is not None:
            info = self._streaming.info
            settings["cache_mb"] = round(info.budget.mib) if info.budget.enabled else 0
            settings["o_direct"] = info.o_direct
            settings["io_threads"] = info.lanes
            settings["lean_load"] = info.lean_load
        return settings

    # ---- generation -------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the current generation within one decode step, or the next one if none runs
        yet (a stop pressed as an answer starts). Safe from any thread."""
        self._cancel.set()
        if self._abort is not None:
            self._abort.set()

    def generate(
        self,
        request: GenerateRequest,
        on_token: OnToken | None = None,
        on_prefill: OnPrefill | None = None,
    ) -> GenerateResult:
        self._thread.check("generate")
        with self._busy:
            try:
                return self._generate(request, on_token, on_prefill)
            finally:
                # A cancel is spent by the generation it stopped. One made just before this
                # generation started stopped it: clearing at the start would have lost it.
                self._cancel.clear()
                if self._abort is not None:
                    self._abort.clear()

    def _generate(
        self, request: GenerateRequest, on_token: OnToken | None, on_prefill: OnPrefill | None
    ) -> GenerateResult:
        if self._kv is None or self._prompts is None:
            return GenerateResult(ok=False, stop_reason=StopReason.ERROR,
                                  error="The model was closed: open it again to continue.")
        started_ns = time.perf_counter_ns()
        if self._sink is not None and not self._run_info_sent:
            self._sink.on_run_info(self.run_info)
            self._run_info_sent = True
        if request.new_chat:
            self.reset_conversation()
        if not request.text.strip():
            return _rejected("The message is empty: type something to send.")
        if self._streaming is not None and self._streaming.failed:
            return GenerateResult(ok=False, stop_reason=StopReason.ERROR,
                                  error=f"{self._streaming.failed}. Reopen the model to continue.")
        n_predict = request.n_predict if request.n_predict is not None else self.config.n_predict
        think = request.think if request.think is not None else self.config.think
        if request.continue_reasoning:
            # Reasoning came after the prompt with thinking on: its continuation must too (off,
            # some templates close the span in the prompt, before the reasoning goes on).
            think = True
        if request.images and self._projector is None:
            return _rejected(NO_PROJECTOR)
        try:
            for image in request.images:
                check_image(image)
            prompt = self._prompts.build(self.history, request.text, think=think,
                                         system_prompt=self.config.system_prompt,
                                         images=request.images, table=self._images,
                                         raw=request.raw)
            self._prompts.extend(prompt, request.continue_from, request.continue_reasoning)
        except ImageInputError as exc:
            return _rejected(f"{exc}. The message was not sent; nothing was lost.")
        except ContinueError as exc:
            prompt.close()
            return _rejected(f"This answer cannot be continued: {exc}. It is unchanged; "
                             "Regenerate makes a new version of it.")
        try:
            return self._run(request, prompt, n_predict, started_ns, on_token, on_prefill)
        finally:
            prompt.close()

    def _run(self, request: GenerateRequest, prompt: Prompt, n_predict: int, started_ns: int,
             on_token: OnToken | None, on_prefill: OnPrefill | None) -> GenerateResult:
        assert self._kv is not None
        # KV cells, not positions: an image on an M-RoPE model takes more of the first.
        if prompt.kv_cells + n_predict > self.n_ctx:
            return _rejected(
                f"The conversation needs {prompt.kv_cells} prompt tokens plus {n_predict} "
                f"tokens to generate, which is more than the context of {self.n_ctx} tokens. "
                "Start a new chat, ask for fewer tokens, or reopen the model with a larger "
                "context size."
            )
        turn = Turn(index=self._turn_index, prompt=prompt, n_predict=n_predict,
                    started_ns=started_ns, stop=request.stop)
        if self._streaming is not None:
            self._streaming.begin_turn(turn.index, request.conversation)
        turn.restored, turn.restore_seconds = self._switch_to(request.conversation)
        reprefill_reason = self._reprefill_reason(prompt.text)
        turn.n_common = self._kv.reuse_prefix(prompt.tokens)
        inside = prompt.image_at(turn.n_common)
        if inside is not None and inside.start < turn.n_common:
            # Half an image cannot be kept: its embeddings are decoded from one encode.
            turn.n_common = self._kv.truncate(inside.start)
        if self._projector is not None:
            turn.images = ImageTurnStats.zero()
            turn.images.n_images = len(prompt.images)
        speculator, spec_note = self._speculation()
        result = self._turn_loop(speculator, spec_note).run(turn, on_token, on_prefill)
        if spec_note.startswith("off:"):
            result.notes.append(SPEC_GREEDY_ONLY)
        self.image_encodes += max(0, turn.images.n_encoded)
        if result.ok and not result.stopped:
            for image in request.images:
                self._images[image.sha256] = image
        summary = result.summary
        if summary is not None and summary.n_prompt >= MIN_RATE_TOKENS:
            # A turn that read a few tokens times mostly overhead, not the prefill rate.
            tokens, seconds = self._prefilled
            self._prefilled = (tokens + summary.n_prompt, seconds + summary.prefill_seconds)
        self._after_turn(turn, result)
        result.notes.extend(prompt.notes)
        result.reprefill_reason = reprefill_reason
        self._turn_index += 1
        return result

    def teacher_force(self, tokens: list[int], on_logits: OnLogits, *, first: int = 0,
                      batch: int = 1) -> ForcedRun:
        """Read `tokens` as given (quality scoring, engine/scoring.py): each position's logits
        go to `on_logits`. The conversation in the context steps aside first (to the pool);
        afterwards the memory holds the text, owned by no conversation. Speculates as a turn
        would when the settings say so (not in batched mode)."""
        self._thread.check("teacher_force")
        with self._busy:
            try:
                assert self._model and self._ctx and self._kv and self._abort
                self._switch_to(None)
                self._kv_text = ""
                speculator = self._speculation()[0] if batch <= 1 else None
                return teacher_force(ForcedParts(
                    model=self._model, ctx=self._ctx, kv=self._kv, abort=self._abort,
                    cancel=self._cancel, streaming=self._streaming, speculator=speculator,
                ), tokens, on_logits, first=first, batch=batch)
            finally:
                self._cancel.clear()
                if self._abort is not None:
                    self._abort.clear()

    def tokenize(self, text: str, *, bos: bool = True) -> list[int]:
        """`text` as the model's tokens, plain text (special tokens are not parsed)."""
        self._thread.check("tokenize")
        assert self._model is not None
        return self._model.tokenize(text, add_special=bos, parse_special=False)

    def token_piece(self, token: int) -> bytes:
        assert self._model is not None
        return self._model.token_to_piece(token)

    def _reprefill_reason(self, prompt_text: str) -> str:
        """Why the new prompt does not extend what the KV holds ("" when it does)."""
        if self._template is None or not self._kv_text:
            return ""
        divergence = find_divergence(
            self._kv_text, prompt_text, self._template,
            last_turn_had_reasoning=self._kv_text_had_reasoning,
        )
        return divergence.reason if divergence else ""

    def _turn_loop(self, speculator: Speculator | None = None, spec_note: str = "off"
                   ) -> TurnLoop:
        assert self._model and self._ctx and self._kv and self._abort
        return TurnLoop(TurnParts(
            model=self._model, ctx=self._ctx, kv=self._kv, abort=self._abort,
            cancel=self._cancel, memory=self._memory, load_seconds=self.load_seconds,
            pick_token=self._pick_token, streaming=self._streaming, sink=self._sink,
            projector=self._projector, pick_row=self._pick_row, speculator=speculator,
            spec_note=spec_note,
        ))

    def _speculation(self) -> tuple[Speculator | None, str]:
        """This turn's speculator and the summary's word for it. Greedy only: the verify rule
        compares argmaxes, so a sampled (or penalised) turn decodes token by token."""
        cfg, model = self.config, self._model
        assert model is not None
        if cfg.spec == "off":
            return None, "off"
        if self._sampler is not None:
            return None, "off: sampling"
        if cfg.spec == "draft":
            if self._drafter is None:  # validate() requires the setting; the open loaded it
                return None, "off: no draft model"
            return Speculator(self._drafter, cfg.spec_draft_max, model.is_eog), "draft"
        return Speculator(NgramDrafter(), cfg.spec_draft_max, model.is_eog), "ngram"

    def _pick_row(self, row: int) -> int:
        """The greedy pick from row `row` of a verify batch (tests wrap this, as _pick_token)."""
        assert self._ctx is not None
        return self._ctx.argmax_ith(row)

    def _pick_token(self) -> int:
        """Greedy argmax, or the sampling chain when temperature > 0 (tests wrap this)."""
        ctx = self._ctx
        assert ctx is not None
        return self._sampler.sample(ctx) if self._sampler is not None else ctx.argmax()

    # ---- the KV pool: one conversation in the context, the others kept aside ----------------

    def _switch_to(self, conversation: str | None) -> tuple[str, float]:
        """Give the context to `conversation`; ("memory"/"disk", seconds) when its state was
        restored from the pool, ("", -1) when it was already there or had none."""
        if conversation == self._owner:
            return "", UNMEASURED
        started = time.perf_counter()
        self._leave_context()
        self._owner = conversation
        got = self._pool.checkout(conversation) if conversation is not None else None
        if got is None:
            return "", UNMEASURED
        state, where = got
        assert self._ctx is not None and self._kv is not None and state.data is not None
        if not self._ctx.set_seq_state(state.data):
            log.warning("llama.cpp refused the kept state of conversation %s; re-reading it",
                        conversation)
            self._pool.release(state)
            self._pool.discard(conversation)
            return "", UNMEASURED
        self._kv.tokens[:] = state.tokens
        self._owner_state = state
        return where, time.perf_counter() - started

    def _leave_context(self) -> None:
        """The conversation in the context steps aside: its state goes to the pool."""
        assert self._ctx is not None and self._kv is not None
        if self._owner is not None and self._kv.tokens:
            self._pool.put(self._owner, self._kv.tokens, self._ctx.seq_state())
        elif self._owner_state is not None:
            self._pool.release(self._owner_state)
        self._owner_state = None
        self._kv.clear()
        self._kv_text = ""

    def forget_conversation(self, conversation: str) -> None:
        """A deleted conversation: nothing of its state is kept, in memory or on disk. If the
        context holds it, the context is emptied (the next turn starts fresh)."""
        self._thread.check("forget_conversation")
        if conversation == self._owner:
            if self._owner_state is not None:
                self._pool.release(self._owner_state)
            self._owner_state = None
            self._owner = None
            if self._kv is not None:
                self._kv.clear()  # the context's memory with it
            self._kv_text = ""
        self._pool.forget(conversation)

    def forecast(self, history: list[Message], text: str,
                 conversation: str | None = None) -> Forecast:
        """What `text` sent after `history` in `conversation` would cost to read, exactly as a
        turn would count it (the same prompt, the same prefix rule), without changing anything.
        """
        self._thread.check("forecast")
        assert self._prompts is not None and self._kv is not None
        try:
            prompt = self._prompts.build(history, text, think=self.config.think,
                                         system_prompt=self.config.system_prompt,
                                         table=self._images)
        except ImageInputError:
            return Forecast(0, 0, UNMEASURED)
        prompt.close()
        if conversation == self._owner:
            held = self._kv.tokens
        else:
            kept = self._pool.get(conversation) if conversation is not None else None
            held = kept.tokens if kept is not None else self._spilled_tokens(conversation)
        n_reused = common_prefix(held, prompt.tokens)
        rate = self._prefill_rate()
        # In KV cells (an M-RoPE image takes one per embedding, more than its positions).
        extra = self._prompts.extra_cells
        total, reused = prompt.kv_cells, kv_cells(prompt.tokens[:n_reused], extra)
        to_read = total - reused
        return Forecast(total, reused, to_read / rate if rate > 0 else UNMEASURED,
                        n_ctx=self.n_ctx, n_predict=self.config.n_predict)

    def _spilled_tokens(self, conversation: str | None) -> list[int]:
        spill = self._pool.spill
        if conversation is None or spill is None:
            return []
        return spill.peek_tokens(conversation)

    def _prefill_rate(self) -> float:
        """Prompt tokens per second over this session's turns that read enough to measure."""
        tokens, seconds = self._prefilled
        return tokens / seconds if seconds > 0 else UNMEASURED

    @property
    def kv_pool(self) -> KvPool:
        return self._pool

    @property
    def kv_owner(self) -> str | None:
        return self._owner

    def _after_turn(self, turn: Turn, result: GenerateResult) -> None:
        """What a finished turn changes in the conversation; an unfinished one changes none."""
        if result.stop_reason is StopReason.ERROR and self._owner is not None:
            # A failed decode discarded the KV: this conversation's kept state goes too (the
            # others are untouched).
            if self._owner_state is not None:
                self._pool.release(self._owner_state)
                self._owner_state = None
            self._pool.discard(self._owner)
        if result.stop_reason in (StopReason.STOPPED, StopReason.ERROR):
            # The KV now holds less than the last turn's text: no explanation beats a wrong one.
            self._kv_text = ""
        elif turn.prompt.user_message is not None:
            assert self._template is not None
            self.history.append(turn.prompt.user_message)
            self.history.append(
                assistant_history_message(result.reasoning, result.text, self._template)
            )
            self._kv_text = turn.prompt.text + turn.generated_text
            self._kv_text_had_reasoning = bool(result.reasoning)


def read_template_file(path: Path) -> str:
    """A chat template file's text; SessionError says what is wrong with it and what to do."""
    fix = "Choose another file, or clear the setting to use the model's own template."
    if kind := not_regular(path):  # reading a FIFO would wait for a writer forever
        raise SessionError(f"the chat template {path} is {kind}, not a file. {fix}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SessionError(f"cannot read the chat template {path}: {exc.strerror}. {fix}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SessionError(f"the chat template {path} is not UTF-8 text (byte {exc.start} is "
                           f"0x{data[exc.start]:02x}). {fix}") from exc
    if not text.strip():
        # Silently using another template would make the model behave unlike what was chosen.
        raise SessionError(f"the chat template {path} is empty. {fix}")
    return text


SPEC_GREEDY_ONLY = (
    "Speculative decoding is greedy-only (temperature 0, no penalties), so this answer was "
    "sampled token by token without it; set the temperature to 0 and the penalties off to "
    "speculate.")

NO_PROJECTOR = (
    "This model was opened without an image projector, so it cannot see images. Choose the "
    "model's mmproj file in the model picker (or pass --mmproj PROJ.gguf), then attach the "
    "image again.")


def _rejected(message: str) -> GenerateResult:
    return GenerateResult(ok=False, stop_reason=StopReason.REJECTED, error=message)
