"""The per-message stats: what the window stores with an answer, as one typed record (Qt-free).

The window builds one from the engine's figures when an answer ends (`stats_from_result` in
workbench/ui/chat/stats_line.py); the store keeps it as JSON in the message's `stats` column;
`format_stats_line` (stats_line.py here) draws the line that the window and exports show.
An answer generated on by Continue takes its runs' figures combined by `continued_stats`, so what
is stored (and shown again on reopening) describes the whole answer.

A figure that was not measured is None and is left out of the JSON rather than stored as 0.
Rows written by other versions still read: a missing key is None, and a key this version does
not know (or a value of a type it cannot read) is kept in `extra` and written back as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_args, get_type_hints

_N = TypeVar("_N", int, float)


@dataclass(frozen=True, slots=True)
class MessageStats:
    # Fields in the order the window has always written the keys, so the JSON reads the same.
    stop_reason: str | None = None  # eos / length / stopped / error / rejected
    n_generated: int | None = None  # tokens generated (summed over the runs of a continued one)
    # The prompt figures (n_prompt, n_reused, prefill_s, ttft_s, prefill_tok_s, kv_source,
    # images) are a continued answer's first run's: the question's cost (continued_stats).
    n_prompt: int | None = None  # prompt tokens prefilled this turn (after KV reuse)
    n_reused: int | None = None  # prompt tokens served from the KV cache
    n_past: int | None = None  # context used after the turn (tokens)
    n_ctx: int | None = None  # the context's size (tokens)
    prefill_s: float | None = None  # prefill wall time (s)
    ttft_s: float | None = None  # request start to first token (s)
    tok_s: float | None = None  # n_generated / gen_s (tokens per second)
    prefill_tok_s: float | None = None  # n_prompt / prefill_s (tokens per second)
    cache_hit_pct: float | None = None  # expert-cache hit rate, cumulative (%), streaming only
    n_think: int | None = None  # tokens generated while reasoning
    think_s: float | None = None  # reasoning time from the engine's per-token timings (s)
    run_id: int | None = None  # the run holding this answer's per-token rows
    x_start: int | None = None  # token index (across the conversation's turns) of the first
    # How the prompt was served: "fresh", "memory" (the conversation's KV kept) or "disk".
    kv_source: str | None = None
    # Images (only with an image projector): in the prompt, encoded this turn (the others were
    # reused from the KV cache), their tokens and the encoder's time (TTFT includes it).
    n_images: int | None = None
    images_encoded: int | None = None
    image_tokens: int | None = None
    image_encode_s: float | None = None
    # Sum of decode wall time over the generated tokens (s), of every run: a continued
    # answer's tok/s is its tokens over this, never a mean of its runs' rates.
    gen_s: float | None = None
    # Times the answer was generated on by Continue (each a run of its own); None when never.
    n_continued: int | None = None
    # What this version cannot read, by key: kept so a row read and written again loses nothing.
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> MessageStats:
        """From the stored dict; missing keys are None, unknown or unreadable ones go to extra."""
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in dict(data or {}).items():
            kind = _KINDS.get(key)
            read = _read(kind, value) if kind is not None else None
            if read is None:
                extra[key] = value
            else:
                known[key] = read
        return cls(**known, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The dict the store writes: measured figures only, then `extra` as it was read."""
        out = {name: value for name in _KINDS if (value := getattr(self, name)) is not None}
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    def replace(self, **changes: Any) -> MessageStats:
        return dataclasses.replace(self, **changes)


def continued_stats(earlier: MessageStats, later: MessageStats) -> MessageStats:
    """The stats of an answer made of `earlier` (its runs so far, combined) and `later` (the run
    that continued it): what the user reads under the answer describes all of it.

    Tokens, decode time and rate, and thinking are summed over the runs; a sum with an
    unmeasured part is unmeasured (None), never the measured parts passed off as the whole.
    The prompt figures (prefill, TTFT, reuse, KV source, images) stay the first run's: under an
    answer they say what the question cost before the answer began, and a continuation's own
    prompt is a re-read of a token or two from the KV memory, which would replace that cost
    with a trivial one ("n_continued" says more runs followed). Where the context stands
    (n_past, n_ctx), the cumulative expert-cache hit rate and the stop reason are the last
    run's: the answer ends where it ended (Continue is offered again after a token limit).
    """
    n_generated = _sum(earlier.n_generated, later.n_generated)
    gen_s = _sum(_decode_seconds(earlier), _decode_seconds(later))
    n_think = (earlier.n_think or 0) + (later.n_think or 0)
    think_s = _sum(_think_seconds(earlier), _think_seconds(later))
    return earlier.replace(
        stop_reason=later.stop_reason,
        n_generated=n_generated,
        n_past=later.n_past, n_ctx=later.n_ctx, cache_hit_pct=later.cache_hit_pct,
        gen_s=round(gen_s, 4) if gen_s is not None else None,
        tok_s=(round(n_generated / gen_s, 2)
               if n_generated is not None and gen_s is not None and gen_s > 0 else None),
        n_think=n_think or None,
        think_s=round(think_s, 3) if n_think and think_s is not None else None,
        # The last run holds the newest rows; the series on the plots begins with the first.
        run_id=later.run_id if later.run_id is not None else earlier.run_id,
        x_start=earlier.x_start if earlier.x_start is not None else later.x_start,
        n_continued=(earlier.n_continued or 0) + 1,
        extra={**earlier.extra, **later.extra},
    )


def _sum(a: _N | None, b: _N | None) -> _N | None:
    return None if a is None or b is None else a + b


def _decode_seconds(stats: MessageStats) -> float | None:
    """A run's decode time: stored since gen_s exists; for an older row, its tokens over its
    rate (exact but for the rate's rounding to 0.01 tok/s); 0 s for a run of no tokens."""
    if stats.gen_s is not None:
        return stats.gen_s
    if stats.n_generated == 0:
        return 0.0
    if stats.n_generated is not None and stats.tok_s:
        return stats.n_generated / stats.tok_s
    return None


def _think_seconds(stats: MessageStats) -> float | None:
    """A run's reasoning time: 0 s for a run that did not reason, None when unmeasured."""
    return stats.think_s if stats.n_think else 0.0


def _kinds() -> dict[str, type]:
    """Each figure's field name and the type it holds (from the annotations, so never drifts)."""
    hints = get_type_hints(MessageStats)
    return {f.name: next(t for t in get_args(hints[f.name]) if t is not type(None))
            for f in dataclasses.fields(MessageStats) if f.name != "extra"}


_KINDS = _kinds()


def _read(kind: type, value: Any) -> Any:
    """`value` as a `kind`, or None when it is not one (bool is not a number here)."""
    if isinstance(value, bool):
        return None
    if kind is str:
        return value if isinstance(value, str) else None
    if kind is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)  # a count some writer stored as 12.0
        return value if isinstance(value, int) else None
    return value if isinstance(value, int | float) else None  # an int is a fine float
