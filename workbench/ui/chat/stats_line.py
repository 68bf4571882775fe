"""The per-message stats: what the window stores with an answer (Qt-free).

The keys below are what the window writes into a message's `stats` (store: Message.stats);
the line itself is drawn by `workbench.store.format_stats_line`, so the window and exports read
the same. Every number comes from the engine's RunSummary (timed on the engine thread); absent
or unmeasured figures are left out rather than stored as 0.
"""

from __future__ import annotations

from typing import Any

from workbench.engine.metrics import RunSummary
from workbench.engine.requests import GenerateResult

# Stats keys, with their meaning and unit.
#   tok_s            generated tokens / sum of decode wall time (tokens per second)
#   n_generated      tokens generated
#   n_prompt         prompt tokens prefilled this turn (after KV reuse)
#   n_reused         prompt tokens served from the KV cache
#   prefill_s        prefill wall time (s);  prefill_tok_s  n_prompt / prefill_s
#   ttft_s           request start to first token (s)
#   n_past, n_ctx    context used after the turn, and its size (tokens)
#   cache_hit_pct    expert-cache hit rate, cumulative (%), only when streaming
#   stop_reason      eos / length / stopped / error / rejected
#   think_s          reasoning time from the engine's per-token timings (s)
#   n_think          tokens generated while reasoning
#   run_id           the run holding this answer's per-token rows
#   x_start          token index (across the conversation's turns) of the first token


def stats_from_result(
    result: GenerateResult, *, think_s: float = -1.0, n_think: int = 0
) -> dict[str, Any]:
    stats: dict[str, Any] = {"stop_reason": result.stop_reason.value}
    s = result.summary
    if s is not None:
        stats.update(_from_summary(s))
    if n_think > 0:
        stats["n_think"] = n_think
        if think_s >= 0:
            stats["think_s"] = round(think_s, 3)
    return stats


def _from_summary(s: RunSummary) -> dict[str, Any]:
    out: dict[str, Any] = {
        "n_generated": s.n_generated, "n_prompt": s.n_prompt, "n_reused": s.n_reused,
        "n_past": s.n_past, "n_ctx": s.n_ctx, "prefill_s": round(s.prefill_seconds, 4),
    }
    if s.n_generated > 0:
        out["ttft_s"] = round(s.ttft_seconds, 4)
    if s.tokens_per_second >= 0:
        out["tok_s"] = round(s.tokens_per_second, 2)
    if s.prefill_tokens_per_second >= 0:
        out["prefill_tok_s"] = round(s.prefill_tokens_per_second, 1)
    if s.cache_hit_pct >= 0:
        out["cache_hit_pct"] = round(s.cache_hit_pct, 1)
    return out


def thought_label(stats: dict[str, Any], live: bool) -> str:
    """The reasoning block's header: live "Thinking…" or "Thought for 12 s"."""
    if live:
        return "Thinking…"
    seconds = stats.get("think_s")
    if seconds is None:
        return "Thoughts"
    return f"Thought for {seconds:.0f} s" if seconds >= 10 else f"Thought for {seconds:.1f} s"
