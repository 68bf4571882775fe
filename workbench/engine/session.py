"""A chat session over one loaded model: multi-turn, KV reuse, cancel, honest per-token telemetry.

The session is used from one thread (the engine thread); only `cancel()` may be called from any
other. Timing discipline: `wall_ms` brackets `llama_decode` alone; process counters are read just
outside that bracket and memory probes after it, so no probe is ever billed to the decode.
"""

from __future__ import annotations

import codecs
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench import __version__
from workbench.config import Config, validate
from workbench.engine import llama
from workbench.engine.chat.fallback import fallback_template
from workbench.engine.chat.history import assistant_history_message, find_divergence
from workbench.engine.chat.reasoning import (
    ReasoningParser,
    detect_reasoning_format,
    parser_for_prompt,
)
from workbench.engine.chat.template import ChatTemplate, TemplateError
from workbench.engine.chat.think import ThinkControl, no_think_prefill, probe_think_control
from workbench.engine.metrics import RunInfo, RunSummary, TokenMetrics
from workbench.engine.model_identity import model_identity
from workbench.engine.probes import PAGE_MIB, MemoryProbe, counters
from workbench.engine.requests import (
    GenerateRequest,
    GenerateResult,
    PrefillProgress,
    StopReason,
    TokenEvent,
)
from workbench.engine.sinks import Sink
from workbench.engine.streaming import StreamingRuntime
from workbench.moe.layout import ModelFacts, ModelFileError, read_model_facts
from workbench.moe.native import AbortFlag
from workbench.moe.registry import NotStreamableError
from workbench.moe.streamer import StreamerError

log = logging.getLogger("workbench.session")

OnToken = Callable[[TokenEvent], None]
OnPrefill = Callable[[PrefillProgress], None]


class SessionError(RuntimeError):
    """Opening failed; the message says what happened and what to do."""


@dataclass(slots=True)
class _Turn:
    """State of one generate() call that must be rolled back if it does not complete."""

    index: int
    n_common: int
    tokens: list[int]
    user_message: dict[str, str] | None
    prompt_text: str  # what was fed after BOS (rendered template, prefill included), or raw text
    started_ns: int
    n_predict: int
    think: bool
    parser: ReasoningParser
    generated: list[str] = field(default_factory=list)  # decoded pieces, as fed to the KV
    utf8: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )


class Session:
    """Owns one model, one context and the conversation it holds."""

    def __init__(self) -> None:  # use Session.open()
        self.config: Config
        self.facts: ModelFacts
        self.run_info: RunInfo
        self.think_control = ThinkControl.TEMPLATE
        self.template_origin = "none (raw text)"
        self.load_seconds = 0.0
        self.history: list[dict[str, str]] = []
        self.kv_tokens: list[int] = []  # exactly the tokens the KV memory holds, in order
        self._model: llama.Model | None = None
        self._ctx: llama.Context | None = None
        self._sampler: llama.Sampler | None = None
        self._abort: AbortFlag | None = None
        self._streaming: StreamingRuntime | None = None
        self._trace_routing = False
        self._template: ChatTemplate | None = None
        self._sink: Sink | None = None
        self._memory = MemoryProbe()
        self._cancel = threading.Event()
        self._turn_index = 0
        self._run_info_sent = False
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
        trace_routing: bool = False,
    ) -> Session:
        """Validate, load the model and create the context. Raises SessionError.

        `trace_routing` records every layer's routed experts while streaming (tests, replay)."""
        problems = validate(config)
        if problems:
            raise SessionError("; ".join(p.message for p in problems))
        self = cls()
        self._sink = sink
        self._trace_routing = trace_routing
        started = time.perf_counter()
        path = Path(config.model) if config.model else _default_model()
        try:
            self.facts = read_model_facts(path)
        except ModelFileError as exc:
            raise SessionError(str(exc)) from exc
        self.config = config.replace(model=str(path))
        try:
            self._load(path, progress)
        except BaseException:
            self.close()
            raise
        self.load_seconds = time.perf_counter() - started
        self.run_info = self._build_run_info(path)
        return self

    def _load(self, path: Path, progress: Callable[[float], bool] | None) -> None:
        cfg = self.config
        overrides = _expert_override(cfg, self.facts)
        if cfg.moe_stream:
            try:
                self._streaming = StreamingRuntime(cfg, self.facts, trace=self._trace_routing)
            except (NotStreamableError, StreamerError) as exc:
                raise SessionError(str(exc)) from exc
        try:
            self._model = llama.Model(path, llama.ModelParams(kv_overrides_int=overrides), progress)
        except llama.LlamaError as exc:
            raise SessionError(_load_failure_message(path, self.facts, str(exc))) from exc
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
        self._abort = AbortFlag()
        self._abort.install(self._ctx.ptr)
        if self._streaming is not None:
            try:
                self._streaming.attach(self._ctx, self._model, self._abort)
            except (RuntimeError, StreamerError) as exc:
                raise SessionError(f"expert streaming could not start: {exc}") from exc
        if cfg.chat_template:
            source = self._model.chat_template()
            self.template_origin = "model file"
            if not source:
                source, name = fallback_template(self.facts.arch)
                self.template_origin = f"built-in {name} (the model file has none)"
                log.info("%s has no chat template; using the built-in %s template", path.name, name)
            self._template = ChatTemplate(
                source=source,
                bos_token=self._model.token_text(self._model.bos),
                eos_token=self._model.token_text(self._model.eos),
            )
            self.think_control = probe_think_control(self._template)
        self._rebuild_sampler()

    def close(self) -> None:
        """Free everything, in order: sampler, context, streamer, abort flag, model. Idempotent.

        The streamer goes after the context (which calls into it) and before the model (whose
        tensors it rebound and now restores)."""
        for obj in (self._sampler, self._ctx, self._streaming, self._abort, self._model):
            if obj is not None:
                obj.close()
        self._sampler = self._ctx = self._streaming = self._abort = self._model = None
        self._memory.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- settings ---------------------------------------------------------------------------

    @property
    def chat_mode(self) -> bool:
        return self._template is not None

    @property
    def n_ctx(self) -> int:
        return self._ctx.n_ctx if self._ctx else 0

    def apply_request_settings(self, config: Config) -> None:
        """Adopt per-request settings; load-time ones need a new session (see config.signature)."""
        from workbench.config import signature

        if signature(config.replace(model=self.config.model)) != signature(self.config):
            raise SessionError("load-time settings changed: open a new session to apply them")
        problems = validate(config)
        if problems:
            raise SessionError("; ".join(p.message for p in problems))
        self.config = config.replace(model=self.config.model)
        self._rebuild_sampler()
        self.run_info.settings = self._resolved_settings()
        self._run_info_sent = False

    @property
    def streaming(self) -> StreamingRuntime | None:
        return self._streaming

    @property
    def warnings(self) -> list[str]:
        """Things the user should know about this session's settings (e.g. the cache cliff)."""
        return list(self._streaming.warnings) if self._streaming else []

    def set_cache_budget_mib(self, mib: float) -> None:
        """Resize the expert cache of an open session (between generations)."""
        if self._streaming is None:
            raise SessionError("this session does not stream experts")
        try:
            self._streaming.set_budget_mib(mib)
        except StreamerError as exc:
            raise SessionError(str(exc)) from exc

    def _rebuild_sampler(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        cfg = self.config
        if cfg.temp > 0:
            self._sampler = llama.Sampler(
                temp=cfg.temp, top_k=cfg.top_k, top_p=cfg.top_p, seed=cfg.seed
            )

    # ---- generation -------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the current generation within one decode step. Safe from any thread."""
        self._cancel.set()
        if self._abort is not None:
            self._abort.set()

    def generate(
        self,
        request: GenerateRequest,
        on_token: OnToken | None = None,
        on_prefill: OnPrefill | None = None,
    ) -> GenerateResult:
        assert self._ctx is not None and self._model is not None, "session is closed"
        self._cancel.clear()
        self._abort.clear()  # type: ignore[union-attr]
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
        notes: list[str] = []
        tokens, user_message, prompt_text = self._prompt_tokens(request.text, think, notes)
        if len(tokens) + n_predict > self.n_ctx:
            return _rejected(
                f"The conversation needs {len(tokens)} prompt tokens plus {n_predict} tokens to "
                f"generate, which is more than the context of {self.n_ctx} tokens. Start a new "
                "chat, ask for fewer tokens, or reopen the model with a larger context size."
            )
        turn = _Turn(
            index=self._turn_index, n_common=0, tokens=tokens, user_message=user_message,
            prompt_text=prompt_text, started_ns=started_ns, n_predict=n_predict, think=think,
            parser=self._new_parser(think, prompt_text),
        )
        reprefill_reason = self._reprefill_reason(prompt_text)
        turn.n_common = self._reuse_prefix(tokens)
        result = self._run_turn(turn, on_token, on_prefill)
        result.notes.extend(notes)
        result.reprefill_reason = reprefill_reason
        self._turn_index += 1
        return result

    def set_history(self, messages: list[dict[str, str]]) -> None:
        """Replace the conversation (e.g. another branch); the matching KV prefix is kept."""
        self.history = [dict(m) for m in messages]

    def reset_conversation(self) -> None:
        """New chat: forget the history and the KV state (the sampler restarts its seed)."""
        self.history.clear()
        self.kv_tokens.clear()
        self._kv_text = ""
        self._ctx.clear()  # type: ignore[union-attr]
        if self._sampler is not None:
            self._sampler.reset()

    def _new_parser(self, think: bool, prompt_text: str) -> ReasoningParser:
        prefilled = self._template is not None and not think and (
            self.think_control is ThinkControl.PREFILL
        )
        if prefilled or self._template is None:
            # A prefilled no-think prompt already closed the reasoning span (and raw text has
            # none): the stream is the answer.
            return ReasoningParser(detect_reasoning_format(None))
        # Starts inside reasoning when the prompt left a span open (e.g. ends with "<think>").
        return parser_for_prompt(detect_reasoning_format(self._template), prompt_text)

    def _reprefill_reason(self, prompt_text: str) -> str:
        """Why the new prompt does not extend what the KV holds ("" when it does)."""
        if self._template is None or not self._kv_text:
            return ""
        divergence = find_divergence(
            self._kv_text, prompt_text, self._template,
            last_turn_had_reasoning=self._kv_text_had_reasoning,
        )
        return divergence.reason if divergence else ""

    def _prompt_tokens(
        self, text: str, think: bool, notes: list[str]
    ) -> tuple[list[int], dict[str, str] | None, str]:
        model = self._model
        assert model is not None
        if self._template is None:
            return model.tokenize(text, add_special=True, parse_special=True), None, text
        user_message = {"role": "user", "content": text}
        messages = [*self.history, user_message]
        if self.config.system_prompt:
            messages.insert(0, {"role": "system", "content": self.config.system_prompt})
        try:
            rendered = self._template.render(
                messages, add_generation_prompt=True, enable_thinking=think
            )
        except TemplateError as exc:
            notes.append(str(exc))  # says that this turn goes to the model as plain text
            return model.tokenize(text, add_special=True, parse_special=True), None, text
        if not think and self.think_control is ThinkControl.PREFILL:
            rendered += no_think_prefill(self._template)
        # The template may write BOS itself; tokenize without specials and add it exactly once.
        bos_text = self._template.bos_token
        had_bos = bool(bos_text) and rendered.startswith(bos_text)
        if had_bos:
            rendered = rendered[len(bos_text):]
        tokens = model.tokenize(rendered, add_special=False, parse_special=True)
        if had_bos or model.add_bos:
            tokens.insert(0, model.bos)
        return tokens, user_message, rendered

    def _reuse_prefix(self, tokens: list[int]) -> int:
        """Keep the longest common prefix in the KV memory; returns how many tokens are reused."""
        ctx = self._ctx
        assert ctx is not None
        n_common = 0
        limit = min(len(self.kv_tokens), len(tokens) - 1)  # always decode >= 1 prompt token
        while n_common < limit and self.kv_tokens[n_common] == tokens[n_common]:
            n_common += 1
        if n_common < len(self.kv_tokens):
            if not ctx.seq_rm(n_common, -1):
                # Some memories (sliding-window attention) refuse a partial removal.
                ctx.clear()
                n_common = 0
            del self.kv_tokens[n_common:]
        return n_common

    def _rollback(self, turn: _Turn) -> None:
        """Undo a cancelled turn: the KV holds only what it held before this turn."""
        ctx = self._ctx
        assert ctx is not None
        if not ctx.seq_rm(turn.n_common, -1):
            ctx.clear()
            turn.n_common = 0
        del self.kv_tokens[turn.n_common:]
        # The KV may now hold less than that text: better no explanation than a wrong one.
        self._kv_text = ""

    def _discard_state(self) -> None:
        """After a decode failure nothing in the KV can be trusted: the next turn starts clean."""
        self._ctx.clear()  # type: ignore[union-attr]
        self.kv_tokens.clear()
        self._kv_text = ""

    def _streaming_failure(self) -> str:
        reason = self._streaming.streamer.fatal() if self._streaming else ""
        if self._streaming is not None:
            self._streaming.failed = reason
        return (f"{reason or 'expert streaming failed'}. The answer is incomplete; reopen the "
                "model (check that the model file is still readable).")

    def _pick_token(self) -> int:
        ctx = self._ctx
        assert ctx is not None
        return self._sampler.sample(ctx) if self._sampler is not None else ctx.argmax()

    def _run_turn(
        self, turn: _Turn, on_token: OnToken | None, on_prefill: OnPrefill | None
    ) -> GenerateResult:
        ctx, model = self._ctx, self._model
        assert ctx is not None and model is not None
        suffix = turn.tokens[turn.n_common:]
        total = len(suffix)
        # ---- prefill, in n_batch chunks (each chunk is also a cancel point) -------------------
        prefill_start = time.perf_counter_ns()
        done = 0
        while done < total:
            if self._cancel.is_set():
                self._rollback(turn)
                return GenerateResult(ok=True, stop_reason=StopReason.STOPPED)
            chunk = suffix[done: done + ctx.n_batch]
            rc = ctx.decode(chunk)
            if rc != 0 and self._abort is not None and self._abort.fatal:
                self._discard_state()
                return GenerateResult(ok=False, stop_reason=StopReason.ERROR,
                                      error=self._streaming_failure())
            if rc == llama.DECODE_ABORTED or (rc != 0 and self._cancel.is_set()):
                self._rollback(turn)
                return GenerateResult(ok=True, stop_reason=StopReason.STOPPED)
            if rc != 0:
                self._discard_state()
                return GenerateResult(
                    ok=False, stop_reason=StopReason.ERROR,
                    error=f"Reading the prompt failed (llama_decode returned {rc}). The cached "
                    "conversation state was discarded; send the message again to retry.",
                )
            self.kv_tokens.extend(chunk)
            done += len(chunk)
            if on_prefill is not None:
                on_prefill(PrefillProgress(done=done, total=total))
        prefill_end = time.perf_counter_ns()
        # ---- generation ------------------------------------------------------------------------
        rows: list[TokenMetrics] = []
        tok = self._pick_token()
        ttft_ns = time.perf_counter_ns() - turn.started_ns
        prev_end = prefill_end
        stop = StopReason.LENGTH
        error = ""
        memory = self._memory
        streaming = self._streaming
        if streaming is not None:
            streaming.start_generation()
        step = 0
        while step < turn.n_predict:
            if model.is_eog(tok):
                stop = StopReason.EOS
                break
            if self._cancel.is_set():
                stop = StopReason.STOPPED
                break
            before = counters()
            t0 = time.perf_counter_ns()
            rc = ctx.decode_one(tok)
            t1 = time.perf_counter_ns()
            after = counters()
            if rc != 0:
                if self._abort is not None and self._abort.fatal:
                    stop = StopReason.ERROR
                    error = self._streaming_failure()
                elif rc == llama.DECODE_ABORTED or self._cancel.is_set():
                    stop = StopReason.STOPPED
                else:
                    stop = StopReason.ERROR
                    error = (
                        f"Generation failed at token {step + 1} (llama_decode returned {rc}). "
                        "The answer is incomplete and was not added to the conversation; the "
                        "cached state was discarded, so the next message re-reads the "
                        "conversation from the start."
                    )
                break
            step += 1
            self.kv_tokens.append(tok)
            mem = memory.sample()
            piece = model.token_to_piece(tok)
            text_piece = turn.utf8.decode(piece)
            turn.generated.append(text_piece)
            delta = turn.parser.feed(text_piece)
            wall_ms = (t1 - t0) / 1e6
            majflt = after.majflt - before.majflt
            row = TokenMetrics(
                step=step, steps=turn.n_predict, turn=turn.index, wall_ms=wall_ms,
                cpu_ms=(after.cpu_ns - before.cpu_ns) / 1e6, majflt=majflt,
                majflt_mib=majflt * PAGE_MIB, loop_overhead_ms=(t0 - prev_end) / 1e6,
                rss_mib=mem.rss_mib, rss_anon_mib=mem.rss_anon_mib, rss_file_mib=mem.rss_file_mib,
                swap_mib=mem.swap_mib, mem_available_mib=mem.mem_available_mib,
                mem_free_mib=mem.mem_free_mib, swap_free_mib=mem.swap_free_mib,
                compute_ms=wall_ms,  # no streaming: all of the decode is compute
                token_id=tok, piece=piece.decode("utf-8", errors="replace"),
                text=delta.answer if delta else (rows[-1].text if rows else ""),
                reasoning=delta.reasoning if delta else (rows[-1].reasoning if rows else ""),
            )
            if streaming is not None:
                streaming.fill(row)
            rows.append(row)
            if self._sink is not None:
                self._sink.on_token(row)
            if on_token is not None:
                on_token(TokenEvent(
                    metrics=row,
                    answer_delta=delta.answer_delta if delta else "",
                    reasoning_delta=delta.reasoning_delta if delta else "",
                    reset=delta.reset if delta else False,
                ))
            prev_end = t1
            if step < turn.n_predict:
                tok = self._pick_token()
        end_ns = time.perf_counter_ns()
        tail = turn.utf8.decode(b"", final=True)
        if tail:
            turn.parser.feed(tail)
        final = turn.parser.finish()
        result = GenerateResult(
            ok=stop is not StopReason.ERROR, stop_reason=stop, text=final.answer,
            reasoning=final.reasoning, error=error,
        )
        result.summary = self._summary(turn, rows, stop, prefill_end - prefill_start, ttft_ns,
                                       end_ns - prev_end, total)
        if streaming is not None:
            streaming.fill_summary(result.summary)
        if self._sink is not None:
            self._sink.on_summary(result.summary)
        if stop is StopReason.STOPPED:
            self._rollback(turn)
        elif stop is StopReason.ERROR:
            self._discard_state()
        elif turn.user_message is not None:
            assert self._template is not None
            self.history.append(turn.user_message)
            self.history.append(
                assistant_history_message(final.reasoning, final.answer, self._template)
            )
            self._kv_text = turn.prompt_text + "".join(turn.generated)
            self._kv_text_had_reasoning = bool(final.reasoning)
        return result

    def _summary(
        self, turn: _Turn, rows: list[TokenMetrics], stop: StopReason, prefill_ns: int,
        ttft_ns: int, tail_ns: int, n_prefilled: int,
    ) -> RunSummary:
        n = len(rows)
        gen_seconds = sum(r.wall_ms for r in rows) / 1e3
        overhead_s = (sum(r.loop_overhead_ms for r in rows) / 1e3) + tail_ns / 1e9
        return RunSummary(
            turn=turn.index, n_generated=n, gen_seconds=gen_seconds, n_prompt=n_prefilled,
            n_reused=turn.n_common, n_past=len(self.kv_tokens), n_ctx=self.n_ctx,
            load_seconds=self.load_seconds, prefill_seconds=prefill_ns / 1e9,
            ttft_seconds=ttft_ns / 1e9,
            majflt_per_token=sum(r.majflt for r in rows) / n if n else -1.0,
            cpu_s_per_token=sum(r.cpu_ms for r in rows) / 1e3 / n if n else -1.0,
            loop_overhead_s_per_token=overhead_s / n if n else -1.0,
            stop_reason=stop.value,
        )

    def _build_run_info(self, path: Path) -> RunInfo:
        model = self._model
        assert model is not None
        facts = self.facts
        return RunInfo(
            engine_version=__version__,
            llama_cpp_python_version=llama.llama_cpp_python_version(),
            model=model_identity(path),
            arch=facts.arch,
            n_layer=model.n_layer,
            n_expert=facts.n_expert,
            n_expert_used=self.config.n_expert_used or facts.n_expert_used,
            n_vocab=model.n_vocab,
            n_ctx_train=model.n_ctx_train,
            chat_template=self._template is not None,
            settings=self._resolved_settings(),
        )

    def _resolved_settings(self) -> dict[str, object]:
        """Every setting as it is in force: automatic and fallback choices resolved."""
        settings = self.config.to_dict()
        if self._streaming is not None:
            info = self._streaming.info
            settings["cache_mb"] = round(info.budget.mib) if info.budget.enabled else 0
            settings["o_direct"] = info.o_direct
            settings["io_threads"] = info.lanes
        return settings


def _expert_override(cfg: Config, facts: ModelFacts) -> tuple[tuple[str, int], ...]:
    """The kv override that makes the graph route fewer experts (validated against the file)."""
    if cfg.n_expert_used <= 0:
        return ()
    if not facts.is_moe:
        raise SessionError(
            f"Active experts was set to {cfg.n_expert_used}, but {facts.path.name} is not a MoE "
            "model (it has no experts). Set it back to the model default (0)."
        )
    if cfg.n_expert_used > facts.n_expert:
        raise SessionError(
            f"Active experts was set to {cfg.n_expert_used}, but {facts.path.name} has only "
            f"{facts.n_expert} experts per layer. Choose at most {facts.n_expert}."
        )
    return ((f"{facts.arch}.expert_used_count", cfg.n_expert_used),)


def _rejected(message: str) -> GenerateResult:
    return GenerateResult(ok=False, stop_reason=StopReason.REJECTED, error=message)


def _default_model() -> Path:
    from workbench.embedded import default_model_path

    return default_model_path()


def _load_failure_message(path: Path, facts: ModelFacts, detail: str) -> str:
    reasons = llama.recent_errors()
    if any("unknown model architecture" in r for r in reasons):
        return (
            f"{path.name} is a GGUF for the architecture '{facts.arch}', which this llama.cpp "
            f"(llama-cpp-python {llama.llama_cpp_python_version()}) does not know. Use a model "
            "of a supported architecture, or update the workbench."
        )
    tail = f" llama.cpp said: {reasons[-1]}" if reasons else ""
    return f"{detail}.{tail} Check that the file is a complete, supported GGUF model."
