"""The per-message stats: what the window stores with an answer, as one typed record (Qt-free).

The window builds one from the engine's figures when an answer ends (`stats_from_result` in
workbench/ui/chat/stats_line.py); the store keeps it as JSON in the message's `stats` column;
`format_stats_line` (stats_line.py here) draws the line that the window and exports show.

A figure that was not measured is None and is left out of the JSON rather than stored as 0.
Rows written by other versions still read: a missing key is None, and a key this version does
not know (or a value of a type it cannot read) is kept in `extra` and written back as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args, get_type_hints


@dataclass(frozen=True, slots=True)
class MessageStats:
    # Fields in the order the window has always written the keys, so the JSON reads the same.
    stop_reason: str | None = None  # eos / length / stopped / error / rejected
    n_generated: int | None = None  # tokens generated
    n_prompt: int | None = None  # prompt tokens prefilled this turn (after KV reuse)
    n_reused: int | None = None  # prompt tokens served from the KV cache
    n_past: int | None = None  # context used after the turn (tokens)
    n_ctx: int | None = None  # the context's size (tokens)
    prefill_s: float | None = None  # prefill wall time (s)
    ttft_s: float | None = None  # request start to first token (s)
    tok_s: float | None = None  # generated tokens / sum of decode wall time (tokens per second)
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
