"""The per-message stats line, as the window and exports show it.

It reads a MessageStats (message_stats.py), so an exported answer carries the line the window
showed. A figure that is absent or negative (unmeasured) is left off, never shown as 0.
"""

from __future__ import annotations

from workbench.store.message_stats import MessageStats

SEPARATOR = " · "
STOP_WORDS = {
    "eos": "finished", "length": "token limit reached", "stopped": "stopped by you",
    "error": "failed", "rejected": "not sent",
}


def _measured(value: float | None) -> float | None:
    return None if value is None or value < 0 else float(value)


def format_stats_line(stats: MessageStats) -> str:
    """E.g. "41.2 tok/s · 128 tokens · prefill 35 tokens in 0.21 s · TTFT 0.25 s · 30 reused ·
    cache hit 92% · finished"; empty when nothing was measured."""
    parts: list[str] = []
    if (rate := _measured(stats.tok_s)) is not None:
        parts.append(f"{rate:.1f} tok/s")
    if (n := _measured(stats.n_generated)) is not None:
        parts.append(f"{n:.0f} tokens")
    n_prompt = _measured(stats.n_prompt)
    prefill_s = _measured(stats.prefill_s)
    if n_prompt and prefill_s is not None:
        parts.append(f"prefill {n_prompt:.0f} tokens in {prefill_s:.2f} s")
    elif n_prompt:
        parts.append(f"prefill {n_prompt:.0f} tokens")
    if (ttft := _measured(stats.ttft_s)) is not None:
        parts.append(f"TTFT {ttft:.2f} s")
    if (reused := _measured(stats.n_reused)) is not None:
        if stats.kv_source == "disk":
            parts.append(f"restored {reused:,.0f} tokens from disk")
        elif reused and stats.kv_source == "memory":
            parts.append(f"reused {reused:,.0f} tokens from memory")
        else:
            parts.append(f"{reused:.0f} reused")
    if (hit := _measured(stats.cache_hit_pct)) is not None:
        parts.append(f"cache hit {hit:.0f}%")
    if reason := stats.stop_reason:
        parts.append(STOP_WORDS.get(reason, reason))
    return SEPARATOR.join(parts)
