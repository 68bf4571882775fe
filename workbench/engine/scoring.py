"""Teacher forcing: read a given token sequence and hand each position's next-token logits to the
caller, one token per decode, so the expert cache, dropping and substitution act exactly as they
do in generation.

This is what quality scoring (bench/quality.py) runs under each setting. The session lends its
parts for one call (`Session.teacher_force`); nothing here keeps state between calls.

Timing discipline is the turn loop's: the decode bracket holds `llama_decode` alone. The caller's
work on the logits (a log-softmax and a KL divergence over the vocabulary) runs outside it and is
timed on its own (`probe_ns`), so it never lowers the run's tokens per second.

Modes:
- one token per decode (the default): what generation does, valid for every setting;
- speculative (the session's speculator): drafts are proposed as in generation and verified in
  one batch against the text (a draft is accepted where it matches the text, the rest is cut
  from the memory), the generation path of `--spec`;
- batched (`batch` > 1): chunks of positions in one decode. Only for settings whose results
  cannot depend on the expert cache's state: a batch routes every position before reading any
  expert, so cache-aware dropping would see a different cache than in decode.
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from workbench.backend import llama
from workbench.backend.abort import AbortFlag
from workbench.config import Config
from workbench.engine.kv_memory import KvMemory
from workbench.engine.model_load import ModelParts
from workbench.engine.speculation.speculator import Speculator, speculator_for
from workbench.engine.streaming import StreamingRuntime

# on_logits(position, logits): `logits` scores tokens[position + 1]; a view valid only during
# the call (copy it to keep it).
OnLogits = Callable[[int, np.ndarray], None]


@dataclass(slots=True)
class ForcedParts:
    """What teacher forcing runs on: the session's objects, borrowed for one call."""

    model: llama.Model
    ctx: llama.Context
    kv: KvMemory
    abort: AbortFlag
    cancel: threading.Event
    streaming: StreamingRuntime | None = None
    speculator: Speculator | None = None


def forced_parts(parts: ModelParts, config: Config, cancel: threading.Event,
                 batch: int = 1) -> ForcedParts:
    """An open session's parts lent to one forced read. It speculates as a greedy turn would
    when `config` says so, except in batched mode (a batch is not a verify step)."""
    assert parts.model and parts.ctx and parts.kv and parts.abort
    speculator = None
    if batch <= 1:
        speculator = speculator_for(config.spec, config.spec_draft_max, False, parts.drafter,
                                    parts.model.is_eog)[0]
    return ForcedParts(model=parts.model, ctx=parts.ctx, kv=parts.kv, abort=parts.abort,
                       cancel=cancel, streaming=parts.streaming, speculator=speculator)


@dataclass(slots=True)
class ForcedRun:
    """What one teacher-forced read cost. `decode_ms[i]` is position i's decode time (a batch's
    time billed to its first position, 0 for the others, as the turn loop bills a verify step)."""

    n_positions: int = 0  # positions whose logits were handed over
    n_reused: int = 0  # tokens the memory already held (their positions were not decoded)
    decodes: int = 0  # llama_decode calls
    decode_ms: list[float] = field(default_factory=list)
    # Expert bytes read by position i's decode (billed like decode_ms); empty when not streaming.
    position_read_bytes: list[int] = field(default_factory=list)
    probe_ns: int = 0  # time spent in on_logits, outside every decode bracket
    read_bytes: int = -1  # expert bytes read from disk during the run (-1: not streaming)
    hit_rate: float = -1.0  # expert cache hit rate during the run, % (-1: not measured)
    stopped: bool = False
    error: str = ""

    @property
    def decode_seconds(self) -> float:
        return sum(self.decode_ms) / 1e3


def teacher_force(parts: ForcedParts, tokens: list[int], on_logits: OnLogits, *,
                  first: int = 0, batch: int = 1) -> ForcedRun:
    """Decode `tokens` and call `on_logits(i, logits)` for every position i in
    [first, len(tokens) - 1): the logits after tokens[: i + 1], which score tokens[i + 1].

    The memory keeps the prefix it shares with `tokens` (a question's prompt read once for all
    its choices), but never the positions to score: those are decoded again. Leaves the memory
    holding `tokens[:-1]` (or less after a stop or a failure)."""
    kv, ctx = parts.kv, parts.ctx
    end = len(tokens) - 1  # the last token is only ever a target
    run = ForcedRun()
    if end <= first:
        return run
    # At most `first` tokens are kept: position `first` must be decoded to have its logits.
    kept = kv.reuse_prefix(tokens[: first + 1])
    run.n_reused = kept
    pos = kept
    streaming = parts.streaming
    last_read = decode_read = 0
    if streaming is not None:
        # Every position is read as a generated token: dropping is armed as in decode.
        streaming.start_generation(pos)
        before = streaming.streamer.counters()
        last_read = before.read_bytes
    while pos < end:
        if parts.cancel.is_set():
            run.stopped = True
            break
        n = 1
        drafts: list[int] = []
        spec = parts.speculator
        if batch > 1:
            n = min(batch, end - pos, ctx.n_batch)
        elif spec is not None and pos >= first:
            # Drafted from what the memory holds, as in generation, then cut to the text.
            drafts = spec.propose(kv.tokens, tokens[pos], end - pos - 1)[: end - pos - 1]
        fed = tokens[pos: pos + n] if not drafts else [tokens[pos], *drafts]
        t0 = time.perf_counter_ns()
        rc = ctx.decode_one(fed[0]) if len(fed) == 1 else ctx.decode_all_logits(fed)
        t1 = time.perf_counter_ns()
        run.decodes += 1
        if rc != 0:
            run.stopped, run.error = _failure(parts, rc, pos)
            break
        if drafts:
            assert spec is not None
            spec.decoded(len(fed), t1 - t0)
            verified = spec.verify(fed[0], drafts, lambda i, at=pos: tokens[at + 1 + i])
            n = len(verified.fed)
            if n < len(fed) and not ctx.seq_rm(len(kv.tokens) + n, -1):
                kv.clear()
                run.error = ("the model's memory refused to drop a rejected draft; score "
                             "with --spec off")
                break
        kv.append(fed[:n])
        if streaming is not None:  # outside the bracket, like every probe
            now = streaming.streamer.counters().read_bytes
            decode_read, last_read = now - last_read, now
        p0 = time.perf_counter_ns()
        for i in range(n):
            if pos + i >= first:
                row = ctx.logits() if len(fed) == 1 else ctx.logits_ith(i)
                on_logits(pos + i, row)
                run.decode_ms.append((t1 - t0) / 1e6 if i == 0 else 0.0)
                if streaming is not None:
                    run.position_read_bytes.append(decode_read if i == 0 else 0)
                run.n_positions += 1
        run.probe_ns += time.perf_counter_ns() - p0
        pos += n
    if streaming is not None:
        after = streaming.streamer.counters()
        run.read_bytes = after.read_bytes - before.read_bytes
        lookups = after.lookups - before.lookups
        run.hit_rate = 100.0 * (after.hits - before.hits) / lookups if lookups > 0 else -1.0
        if streaming.routes is not None:
            # A forced read is no turn: left pending, its loads (the thread probe's at open,
            # a score's) would be filed under the next turn and skew its cache-sizing curves.
            streaming.routes.discard_pending()
    return run


def _failure(parts: ForcedParts, rc: int, pos: int) -> tuple[bool, str]:
    """(stopped, error) for a failed decode; the memory is made safe."""
    if parts.abort.fatal:
        parts.kv.clear()
        reason = parts.streaming.streamer.fatal() if parts.streaming is not None else ""
        return False, f"{reason or 'expert streaming failed'}; reopen the model"
    if rc == llama.DECODE_ABORTED or parts.cancel.is_set():
        parts.kv.truncate(pos)
        if parts.ctx.pos_max() >= len(parts.kv.tokens):
            parts.kv.clear()
        return True, ""
    parts.kv.clear()
    return False, f"reading the text failed at token {pos + 1} (llama_decode returned {rc})"


def token_pieces(model: llama.Model, tokens: list[int]) -> list[str]:
    """Each token's text in sequence, as generation gives it (a scored run's rows): decoded
    incrementally like the turn loop's, so a character split over byte tokens is the text of
    the token that completes it ("" for the others)."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = [utf8.decode(model.token_to_piece(t, special=False)) for t in tokens]
    if out:
        out[-1] += utf8.decode(b"", final=True)
    return out
