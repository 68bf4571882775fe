"""The per-message stats line, as the window and exports show it.

It reads a MessageStats (message_stats.py), so an exported answer carries the line the window
showed. A figure that is absent or negative (unmeasured) is left off, never shown as 0.
"""

from __future__ import annotations

from workbench.engine.summary_labels import CACHE_HIT, RATE, TTFT
from workbench.store.message_stats import MessageStats

SEPARATOR = " · "
STOP_WORDS = {
    "eos": "finished", "length": "token limit reached", "stopped": "stopped by you",
    "error": "failed", "rejected": "not sent",
}


def _measured(value: float | None) -> float | None:
    return None if value is None or value < 0 else float(value)


def image_phrase(stats: MessageStats) -> str:
    """E.g. "1 image, 256 tokens, encoded in 0.8 s" or "2 images reused from memory"; "" when
    the prompt had none."""
    n = _measured(stats.n_images)
    if not n:
        return ""
    noun = f"{n:.0f} image{'s' * (n != 1)}"
    encoded = _measured(stats.images_encoded) or 0
    if not encoded:
        return f"{noun} reused from memory"
    tokens = _measured(stats.image_tokens)
    seconds = _measured(stats.image_encode_s)
    text = noun if encoded == n else f"{noun} ({encoded:.0f} encoded)"
    if tokens is not None:
        text += f", {tokens:.0f} tokens"
    if seconds is not None:
        text += f", encoded in {seconds:.2f} s"
    return text


def format_stats_line(stats: MessageStats) -> str:
    """E.g. "41.2 tok/s · 128 tokens · prefill 35 tokens in 0.21 s · TTFT 0.25 s · 30 reused ·
    cache hit 92% · continued 1× · finished"; empty when nothing was measured."""
    parts: list[str] = []
    if (rate := _measured(stats.tok_s)) is not None:
        parts.append(f"{rate:.1f} {RATE.unit}")
    if (n := _measured(stats.n_generated)) is not None:
        parts.append(f"{n:.0f} tokens")
    n_prompt = _measured(stats.n_prompt)
    prefill_s = _measured(stats.prefill_s)
    if n_prompt and prefill_s is not None:
        parts.append(f"prefill {n_prompt:.0f} tokens in {prefill_s:.2f} s")
    elif n_prompt:
        parts.append(f"prefill {n_prompt:.0f} tokens")
    if images := image_phrase(stats):
        parts.append(images)
    if (ttft := _measured(stats.ttft_s)) is not None:
        parts.append(f"{TTFT.label} {ttft:.2f} {TTFT.unit}")
    if (reused := _measured(stats.n_reused)) is not None:
        if stats.kv_source == "disk":
            parts.append(f"restored {reused:,.0f} tokens from disk")
        elif reused and stats.kv_source == "memory":
            parts.append(f"reused {reused:,.0f} tokens from memory")
        else:
            parts.append(f"{reused:.0f} reused")
    if (hit := _measured(stats.cache_hit_pct)) is not None:
        parts.append(f"{CACHE_HIT.label} {hit:.0f}{CACHE_HIT.unit}")
    # The prompt figures above are the question's (the first run's): this says more runs
    # generated on, and the tokens and tok/s count them all.
    if continued := _measured(stats.n_continued):
        parts.append(f"continued {continued:.0f}×")
    if reason := stats.stop_reason:
        parts.append(STOP_WORDS.get(reason, reason))
    return SEPARATOR.join(parts)
