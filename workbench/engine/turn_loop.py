"""One turn of a session: prefill the prompt's new suffix, then decode token by token.

The session decides what a turn is (its prompt, how much of the KV memory it reuses) and what a
finished turn changes in the conversation; this module runs it. Timing discipline: `wall_ms`
brackets `llama_decode` alone; process counters are read just outside that bracket and memory
probes after it, so no probe is ever billed to the decode.

A turn that does not complete leaves the KV memory trustworthy: a cancel cuts it back to the
reused prefix, a decode failure clears it (nothing in it can be trusted afterwards).
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.backend import llama, mtmd
from workbench.backend.abort import AbortFlag
from workbench.engine.images import ImageTurnStats
from workbench.engine.kv_memory import KvMemory
from workbench.engine.metrics import UNMEASURED, TokenMetrics
from workbench.engine.model_load import ModelParts
from workbench.engine.probes import MemoryProbe, counters
from workbench.engine.prompt import ImageSpan, Prompt
from workbench.engine.requests import GenerateResult, PrefillProgress, StopReason, TokenEvent
from workbench.engine.sinks import Sink
from workbench.engine.speculation.speculator import Speculator, fill_spec_summary
from workbench.engine.streaming import StreamingRuntime
from workbench.engine.token_choice import TokenChoice
from workbench.engine.token_row import token_row, turn_summary
from workbench.moe.routes import Phase

ROLLBACK_REFUSED = (
    "The model's memory refused to drop a rejected draft (its cache cannot remove a tail), so "
    "the answer stopped here and was not added to the conversation. Turn speculative decoding "
    "off (--spec off) for this model.")

OnToken = Callable[[TokenEvent], None]
OnPrefill = Callable[[PrefillProgress], None]


@dataclass(slots=True)
class Turn:
    """One generate() call: what must be rolled back if it does not complete."""

    index: int
    prompt: Prompt
    n_predict: int
    started_ns: int
    n_common: int = 0  # prompt tokens reused from the KV memory
    restored: str = ""  # "memory" / "disk" when the conversation's KV state was restored
    restore_seconds: float = UNMEASURED  # how long that took (TTFT includes it)
    images: ImageTurnStats = field(default_factory=ImageTurnStats)
    generated: list[str] = field(default_factory=list)  # decoded pieces, as fed to the KV
    utf8: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )
    stop: tuple[str, ...] = ()  # stop strings (GenerateRequest.stop)
    settings: dict[str, object] = field(default_factory=dict)  # TurnSettings.recorded()
    _tail: str = ""  # the end of the generated text, as long as a stop string could need

    def hits_stop(self, piece: str) -> bool:
        """`piece` was just generated: does the text now contain a stop string? Only the
        tail a new match could lie in is searched, so a long answer costs no more per token."""
        if not self.stop:
            return False
        longest = max(len(s) for s in self.stop)
        self._tail = (self._tail + piece)[-(longest + len(piece)):]
        return any(s and s in self._tail for s in self.stop)

    @property
    def generated_text(self) -> str:
        return "".join(self.generated)


@dataclass(slots=True)
class TurnParts:
    """What a turn runs on: the session's objects, borrowed for the length of one turn."""

    model: llama.Model
    ctx: llama.Context
    kv: KvMemory
    abort: AbortFlag
    cancel: threading.Event
    memory: MemoryProbe
    load_seconds: float
    pick_token: Callable[[], int]  # the next token from the context's last logits
    pick_row: Callable[[int], int] = lambda i: -1  # the greedy pick from verify row i
    speculator: Speculator | None = None  # drafts tokens to verify (greedy turns only)
    spec_note: str = "off"  # the summary's `spec`: the drafter's kind, or why it is off
    streaming: StreamingRuntime | None = None
    sink: Sink | None = None
    projector: mtmd.Projector | None = None  # reads the prompt's images, when it has any
    # The choice behind the token `pick_token` returned last (a turn with a `Decoding`).
    last_choice: Callable[[], TokenChoice | None] = lambda: None
    # The grammar's time (ms) for the token `pick_token` returned last; None: no grammar runs,
    # and the rows keep grammar_ms at -1 with no work per token.
    grammar_ms: Callable[[], float] | None = None

    @classmethod
    def lent(cls, parts: ModelParts, cancel: threading.Event, memory: MemoryProbe,
             load_seconds: float, sink: Sink | None, **picking: Any) -> TurnParts:
        """An open session's parts, lent to one turn; `picking` says how it picks tokens."""
        assert parts.model and parts.ctx and parts.kv and parts.abort
        return cls(model=parts.model, ctx=parts.ctx, kv=parts.kv, abort=parts.abort,
                   cancel=cancel, memory=memory, load_seconds=load_seconds,
                   streaming=parts.streaming, sink=sink, projector=parts.projector, **picking)


class TurnLoop:
    """Runs turns on one set of parts; a new loop is made whenever a part changes."""

    def __init__(self, parts: TurnParts) -> None:
        self._p = parts

    def run(self, turn: Turn, on_token: OnToken | None, on_prefill: OnPrefill | None
            ) -> GenerateResult:
        p = self._p
        if p.streaming is not None:
            p.streaming.start_prefill()  # the phase decides whether dropping is armed
        prefill_start = time.perf_counter_ns()
        ended = self._prefill(turn, on_prefill)
        if ended is not None:
            return ended
        prefill_end = time.perf_counter_ns()
        n_prefilled = len(turn.prompt.tokens) - turn.n_common
        # ---- generation: one decode per token, nothing but llama_decode in the bracket --------
        ctx, model, kv = p.ctx, p.model, p.kv
        parser, memory, streaming, sink, cancel = (turn.prompt.parser, p.memory, p.streaming,
                                                   p.sink, p.cancel)
        rows: list[TokenMetrics] = []
        tok = p.pick_token()
        choice = p.last_choice()
        ttft_ns = time.perf_counter_ns() - turn.started_ns
        prev_end = prefill_end
        stop, error = StopReason.LENGTH, ""
        spec = p.speculator
        grammar_ms = p.grammar_ms
        if streaming is not None:
            streaming.start_generation(len(kv.tokens))
        while len(rows) < turn.n_predict:
            if model.is_eog(tok):
                stop = StopReason.EOS
                break
            if cancel.is_set():
                stop = StopReason.STOPPED
                break
            drafts: list[int] = []
            draft_ns = 0
            if spec is not None:
                d0 = time.perf_counter_ns()
                drafts = spec.propose(kv.tokens, tok, turn.n_predict - len(rows))
                draft_ns = time.perf_counter_ns() - d0
                spec.tally.draft_ns += draft_ns
                spec.tally.decodes += 1
            before = counters()
            t0 = time.perf_counter_ns()
            rc = ctx.decode_all_logits([tok, *drafts]) if drafts else ctx.decode_one(tok)
            t1 = time.perf_counter_ns()
            after = counters()
            if rc != 0:
                stop, error = self._decode_failure(rc, len(rows))
                break
            if spec is not None:
                spec.decoded(1 + len(drafts), t1 - t0)
            if drafts:
                assert spec is not None
                verified = spec.verify(tok, drafts, p.pick_row)
                fed, nxt = verified.fed, verified.next_token
                if verified.n_accepted < verified.n_drafted and not ctx.seq_rm(
                        len(kv.tokens) + len(fed), -1):
                    stop, error = StopReason.ERROR, ROLLBACK_REFUSED
                    break
            else:
                fed, nxt = [tok], -1
            if streaming is not None:
                streaming.record_routes(turn.index, Phase.DECODE, len(kv.tokens))
            kv.append(fed)
            memory_now = memory.sample_due(t1, fresh=after.majflt != before.majflt)
            for i, fed_tok in enumerate(fed):
                first = i == 0
                piece = model.token_to_piece(fed_tok)
                text_piece = turn.utf8.decode(piece)
                turn.generated.append(text_piece)
                delta = parser.feed(text_piece)
                at_stop = turn.hits_stop(text_piece)
                # A verify step's decode is billed to its first row; the others took no decode.
                row = token_row(
                    step=len(rows) + 1, steps=turn.n_predict, turn=turn.index, token=fed_tok,
                    piece=piece, t0_ns=t0 if first else t1, t1_ns=t1,
                    prev_end_ns=prev_end if first else t1, before=before if first else after,
                    after=after, memory=memory_now, delta=delta,
                    previous=rows[-1] if rows else None,
                )
                if spec is not None:
                    row.mtp_batch = len(fed)
                    row.mtp_draft_ms = draft_ns / 1e6 if first else 0.0
                    row.drafted = 0 if first else 1
                    row.draft_len = len(drafts)
                    row.draft_kept = len(fed) - 1
                if grammar_ms is not None:  # the pick of `tok`, before its decode (no drafts)
                    row.grammar_ms = grammar_ms()
                if streaming is not None:
                    streaming.fill(row)
                rows.append(row)
                if sink is not None:
                    sink.on_token(row)
                if on_token is not None:
                    on_token(TokenEvent(
                        metrics=row,
                        answer_delta=delta.answer_delta if delta else "",
                        reasoning_delta=delta.reasoning_delta if delta else "",
                        reset=delta.reset if delta else False,
                        expert_map=streaming.activity() if streaming is not None and first
                        else None,
                        choice=choice if first else None,
                    ))
                if at_stop:  # the rest of a verified draft is past the stop: not the answer's
                    break
            prev_end = t1
            if at_stop:  # after this token's row and event: the turn ends as at an end token
                stop = StopReason.EOS
                break
            if drafts:
                tok = nxt
            elif len(rows) < turn.n_predict:
                tok = p.pick_token()
                choice = p.last_choice()
        end_ns = time.perf_counter_ns()
        tail = turn.utf8.decode(b"", final=True)
        if tail:
            parser.feed(tail)
        final = parser.finish()
        result = GenerateResult(ok=stop is not StopReason.ERROR, stop_reason=stop,
                                text=final.answer, reasoning=final.reasoning, error=error)
        result.summary = turn_summary(
            turn=turn.index, rows=rows, stop_reason=stop.value, n_prefilled=n_prefilled,
            n_reused=turn.n_common, n_past=len(kv.tokens), n_ctx=ctx.n_ctx,
            load_seconds=p.load_seconds, prefill_ns=prefill_end - prefill_start,
            ttft_ns=ttft_ns, tail_ns=end_ns - prev_end,
        )
        result.summary.kv_source = turn.restored or ("memory" if turn.n_common else "fresh")
        result.summary.kv_restore_seconds = turn.restore_seconds
        result.summary.n_images = turn.images.n_images
        result.summary.images_encoded = turn.images.n_encoded
        result.summary.image_tokens = turn.images.image_tokens
        result.summary.image_encode_seconds = turn.images.encode_seconds
        if streaming is not None:
            streaming.fill_summary(result.summary)
        result.summary.spec = p.spec_note
        result.summary.turn_settings = dict(turn.settings)
        if spec is not None:
            fill_spec_summary(result.summary, spec.tally)
        if sink is not None:
            sink.on_summary(result.summary)
        if stop is StopReason.STOPPED:
            self._rollback(turn)
        elif stop is StopReason.ERROR:
            kv.clear()
        return result

    def _prefill(self, turn: Turn, on_prefill: OnPrefill | None) -> GenerateResult | None:
        """Decode the prompt suffix: text in n_batch chunks, each image as one encode and its
        embeddings' decode (chunk boundaries are cancel points; the abort flag works inside a
        decode, not inside an image's encode). A result when the turn ends here."""
        p = self._p
        ctx, kv, tokens = p.ctx, p.kv, turn.prompt.tokens
        start = pos = turn.n_common
        total = len(tokens) - start
        while pos < len(tokens):
            if p.cancel.is_set():  # each chunk is a cancel point; the abort flag works inside
                return self._stopped(turn)
            if p.streaming is not None:
                p.streaming.set_position(len(kv.tokens))
            span = turn.prompt.image_at(pos)
            if span is not None:
                ended = self._image(turn, span, pos)
                if ended is not None:
                    return ended
                pos += span.n_pos
            else:
                nxt = min((s.start for s in turn.prompt.images if s.start > pos),
                          default=len(tokens))
                chunk = tokens[pos: min(pos + ctx.n_batch, nxt)]
                ended = self._decode_failed(turn, ctx.decode(chunk))
                if ended is not None:
                    return ended
                if p.streaming is not None:
                    p.streaming.record_routes(turn.index, Phase.PREFILL, len(kv.tokens))
                kv.append(chunk)
                pos += len(chunk)
            if on_prefill is not None:
                on_prefill(PrefillProgress(done=pos - start, total=total))
        return None

    def _image(self, turn: Turn, span: ImageSpan, pos: int) -> GenerateResult | None:
        """Encode one image (timed, counted) and decode its embeddings at `pos`."""
        p = self._p
        projector = p.projector
        assert projector is not None and span.start == pos
        t0 = time.perf_counter()
        rc = projector.encode(span.chunk)
        stats = turn.images
        stats.encode_seconds += time.perf_counter() - t0
        stats.n_encoded += 1
        stats.image_tokens += span.chunk.n_tokens
        if rc != 0:
            p.kv.clear()
            return GenerateResult(
                ok=False, stop_reason=StopReason.ERROR,
                error=f"The image projector could not encode an image (libmtmd returned {rc}). "
                "The cached conversation state was discarded; send the message again to retry.")
        if p.cancel.is_set():  # the encode could not be interrupted; its result is dropped
            return self._stopped(turn)
        ended = self._decode_failed(turn, projector.decode_image(p.ctx, span.chunk, pos))
        if ended is not None:
            return ended
        p.kv.append(turn.prompt.tokens[pos: pos + span.n_pos])
        return None

    def _decode_failed(self, turn: Turn, rc: int) -> GenerateResult | None:
        """None when a prefill decode succeeded; else how the turn ends (the KV made safe)."""
        p = self._p
        if rc == 0:
            return None
        if p.abort.fatal:
            p.kv.clear()
            return GenerateResult(ok=False, stop_reason=StopReason.ERROR,
                                  error=self._streaming_failure())
        if rc == llama.DECODE_ABORTED or p.cancel.is_set():
            return self._stopped(turn)
        p.kv.clear()
        return GenerateResult(
            ok=False, stop_reason=StopReason.ERROR,
            error=f"Reading the prompt failed (llama_decode returned {rc}). The cached "
            "conversation state was discarded; send the message again to retry.",
        )

    def _stopped(self, turn: Turn) -> GenerateResult:
        self._rollback(turn)
        return GenerateResult(ok=True, stop_reason=StopReason.STOPPED)

    def _rollback(self, turn: Turn) -> None:
        """Undo a cancelled turn: the KV holds only what it held before this turn."""
        kv, ctx = self._p.kv, self._p.ctx
        turn.n_common = kv.truncate(turn.n_common)
        # An image's embeddings are decoded in n_batch pieces: a stop inside one leaves the
        # pieces before it in the memory, past what the mirror says. Remove them too.
        if ctx.pos_max() >= turn.n_common and not ctx.seq_rm(turn.n_common, -1):
            kv.clear()
            turn.n_common = 0

    def _decode_failure(self, rc: int, step: int) -> tuple[StopReason, str]:
        p = self._p
        if p.abort.fatal:
            return StopReason.ERROR, self._streaming_failure()
        if rc == llama.DECODE_ABORTED or p.cancel.is_set():
            return StopReason.STOPPED, ""
        return StopReason.ERROR, (
            f"Generation failed at token {step + 1} (llama_decode returned {rc}). The answer is "
            "incomplete and was not added to the conversation; the cached state was discarded, "
            "so the next message re-reads the conversation from the start."
        )

    def _streaming_failure(self) -> str:
        streaming = self._p.streaming
        reason = streaming.streamer.fatal() if streaming is not None else ""
        if streaming is not None:
            streaming.failed = reason
        return (f"{reason or 'expert streaming failed'}. The answer is incomplete; reopen the "
                "model (check that the model file is still readable).")
