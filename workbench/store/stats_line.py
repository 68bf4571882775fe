"""The per-message stats line as exports show it.

A message's `stats` is written by the window (workbench/ui/chat/stats_line.py documents the
keys: tok_s, n_generated, n_prompt, prefill_s, ttft_s, n_reused, cache_hit_pct, stop_reason,
...). This reads the same keys so that an exported answer carries the line the window showed.
A figure that is absent or negative (unmeasured) is left off, never shown as 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SEPARATOR = " · "
STOP_WORDS = {
    "eos": "finished", "length": "token limit reached", "stopped": "stopped by you",
    "error": "failed", "rejected": "not sent",
}


def _measured(stats: Mapping[str, Any], key: str) -> float | None:
    value = stats.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def format_stats_line(stats: Mapping[str, Any]) -> str:
    """E.g. "41.2 tok/s · 128 tokens · prefill 35 tokens in 0.21 s · TTFT 0.25 s · 30 reused ·
    cache hit 92% · finished"; empty when nothing was measured."""
    parts: list[str] = []
    if (rate := _measured(stats, "tok_s")) is not None:
        parts.append(f"{rate:.1f} tok/s")
    if (n := _measured(stats, "n_generated")) is not None:
        parts.append(f"{n:.0f} tokens")
    n_prompt = _measured(stats, "n_prompt")
    prefill_s = _measured(stats, "prefill_s")
    if n_prompt and prefill_s is not None:
        parts.append(f"prefill {n_prompt:.0f} tokens in {prefill_s:.2f} s")
    elif n_prompt:
        parts.append(f"prefill {n_prompt:.0f} tokens")
    if (ttft := _measured(stats, "ttft_s")) is not None:
        parts.append(f"TTFT {ttft:.2f} s")
    if (reused := _measured(stats, "n_reused")) is not None:
        parts.append(f"{reused:.0f} reused")
    if (hit := _measured(stats, "cache_hit_pct")) is not None:
        parts.append(f"cache hit {hit:.0f}%")
    if reason := stats.get("stop_reason"):
        parts.append(STOP_WORDS.get(str(reason), str(reason)))
    return SEPARATOR.join(parts)
