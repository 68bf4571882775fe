"""The per-message stats as the window makes them: from an answer's engine figures, and the
reasoning block's header (Qt-free).

What each figure means is in MessageStats (workbench/store/message_stats.py); the line itself
is drawn by `workbench.store.format_stats_line`, so the window and exports read the same. Every
number comes from the engine's RunSummary (timed on the engine thread); absent or unmeasured
figures are left out rather than stored as 0.
"""

from __future__ import annotations

from workbench.engine.kv_pool import HeldState
from workbench.engine.requests import Forecast, GenerateResult
from workbench.store import MessageStats


def stats_from_result(
    result: GenerateResult, *, think_s: float = -1.0, n_think: int = 0
) -> MessageStats:
    thinking = n_think > 0
    stats = MessageStats(
        stop_reason=result.stop_reason.value,
        n_think=n_think if thinking else None,
        think_s=round(think_s, 3) if thinking and think_s >= 0 else None,
    )
    s = result.summary
    if s is None:
        return stats
    return stats.replace(
        n_generated=s.n_generated, n_prompt=s.n_prompt, n_reused=s.n_reused, n_past=s.n_past,
        n_ctx=s.n_ctx, prefill_s=round(s.prefill_seconds, 4),
        ttft_s=round(s.ttft_seconds, 4) if s.n_generated > 0 else None,
        tok_s=_measured(s.tokens_per_second, 2),
        # Kept so a Continue can rate the whole answer: its tokens over all runs' decode time.
        gen_s=round(s.gen_seconds, 4) if s.n_generated > 0 and s.gen_seconds >= 0 else None,
        prefill_tok_s=_measured(s.prefill_tokens_per_second, 1),
        cache_hit_pct=_measured(s.cache_hit_pct, 1), kv_source=s.kv_source or None,
        n_images=s.n_images if s.n_images >= 0 else None,
        images_encoded=s.images_encoded if s.images_encoded >= 0 else None,
        image_tokens=s.image_tokens if s.image_tokens >= 0 else None,
        image_encode_s=_measured(s.image_encode_seconds, 3),
    )


def kv_states_text(states: list[HeldState], live: str | None) -> str:
    """The telemetry panel's line of kept conversation states ("" when none is kept besides the
    one in the context), e.g. "Kept conversation states: #3 in the context · #1 2,040 tokens,
    13.4 MiB in memory · #2 880 tokens, 5.8 MiB on disk"."""
    others = [f"#{s.key} {s.n_tokens:,} tokens, {s.mib:.1f} MiB "
              f"{'in memory' if s.where == 'memory' else 'on disk'}"
              for s in states if s.key != live]
    if not others:
        return ""
    here = [f"#{live} in the context"] if live else []
    return "Kept conversation states: " + " · ".join(here + others)


def forecast_text(forecast: Forecast) -> str:
    """The composer's cost line for a draft: "reads 35 new tokens · 2,040 kept · ~0.1 s"."""
    parts = [f"reads {forecast.n_to_process:,} new token{'s' * (forecast.n_to_process != 1)}"]
    if forecast.n_reused:
        parts.append(f"{forecast.n_reused:,} kept")
    if forecast.seconds >= 0:
        parts.append(f"~{forecast.seconds:.1f} s" if forecast.seconds >= 0.05 else "< 0.1 s")
    return " · ".join(parts)


def forecast_warning(forecast: Forecast) -> str:
    """Said before Send when the draft cannot be sent ("" when it fits): the turn would be
    refused, so the composer warns while there is still time to shorten it."""
    if forecast.fits:
        return ""
    return (f"Too long for the context: {forecast.n_prompt:,} prompt tokens + "
            f"{forecast.n_predict:,} to generate > {forecast.n_ctx:,}. Shorten the message, start "
            "a new chat, lower Tokens to generate or reopen the model with a larger context.")


def _measured(value: float, digits: int) -> float | None:
    """Rounded for storage; None for an unmeasured (negative) figure."""
    return round(value, digits) if value >= 0 else None


def thought_label(stats: MessageStats, live: bool) -> str:
    """The reasoning block's header: live "Thinking…" or "Thought for 12 s"."""
    if live:
        return "Thinking…"
    seconds = stats.think_s
    if seconds is None:
        return "Thoughts"
    return f"Thought for {seconds:.0f} s" if seconds >= 10 else f"Thought for {seconds:.1f} s"
