"""Assembling a token's metrics row and a turn's summary from what the loop measured."""

from __future__ import annotations

from workbench.engine.chat.reasoning import ReasoningDelta
from workbench.engine.metrics import UNMEASURED, RunSummary, TokenMetrics
from workbench.engine.probes import PAGE_MIB, Counters, MemorySample
from workbench.engine.requests import StopReason


def token_row(
    *, step: int, steps: int, turn: int, token: int, piece: bytes, t0_ns: int, t1_ns: int,
    prev_end_ns: int, before: Counters, after: Counters, memory: MemorySample,
    delta: ReasoningDelta | None, previous: TokenMetrics | None,
) -> TokenMetrics:
    """One generated token. `t0_ns`..`t1_ns` is the decode bracket; counters were read just
    outside it and memory after it."""
    wall_ms = (t1_ns - t0_ns) / 1e6
    majflt = after.majflt - before.majflt
    return TokenMetrics(
        step=step, steps=steps, turn=turn, wall_ms=wall_ms,
        cpu_ms=(after.cpu_ns - before.cpu_ns) / 1e6, majflt=majflt,
        majflt_mib=majflt * PAGE_MIB, loop_overhead_ms=(t0_ns - prev_end_ns) / 1e6,
        rss_mib=memory.rss_mib, rss_anon_mib=memory.rss_anon_mib,
        rss_file_mib=memory.rss_file_mib, swap_mib=memory.swap_mib,
        mem_available_mib=memory.mem_available_mib, mem_free_mib=memory.mem_free_mib,
        swap_free_mib=memory.swap_free_mib,
        compute_ms=wall_ms,  # all of the decode is compute unless the streamer says otherwise
        token_id=token, piece=piece.decode("utf-8", errors="replace"),
        text=delta.answer if delta else (previous.text if previous else ""),
        reasoning=delta.reasoning if delta else (previous.reasoning if previous else ""),
    )


def turn_summary(
    *, turn: int, rows: list[TokenMetrics], stop_reason: str, n_prefilled: int, n_reused: int,
    n_past: int, n_ctx: int, load_seconds: float, prefill_ns: int, ttft_ns: int, tail_ns: int,
) -> RunSummary:
    """The generation phase of one turn. Loop overhead includes the tail after the last token,
    except in a stopped turn: its tail is the decode that Stop aborted (up to a whole token's
    time, or a prefill's), not overhead, and billed to one token it read "1237 ms"."""
    n = len(rows)
    tail_s = 0.0 if stop_reason == StopReason.STOPPED else tail_ns / 1e9
    overhead_s = sum(r.loop_overhead_ms for r in rows) / 1e3 + tail_s
    return RunSummary(
        turn=turn, n_generated=n, gen_seconds=sum(r.wall_ms for r in rows) / 1e3,
        n_prompt=n_prefilled, n_reused=n_reused, n_past=n_past, n_ctx=n_ctx,
        load_seconds=load_seconds, prefill_seconds=prefill_ns / 1e9, ttft_seconds=ttft_ns / 1e9,
        majflt_per_token=sum(r.majflt for r in rows) / n if n else UNMEASURED,
        cpu_s_per_token=sum(r.cpu_ms for r in rows) / 1e3 / n if n else UNMEASURED,
        loop_overhead_s_per_token=overhead_s / n if n else UNMEASURED,
        stop_reason=stop_reason,
    )
