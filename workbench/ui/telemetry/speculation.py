"""The speculation lane of the live plots: per decode, tokens drafted and tokens kept.

Read from the engine's per-row columns `draft_len` and `draft_kept` (every row of one verify
step carries its step's counts, so the lane is a step curve that needs no state across rows).
While speculation is off they are -1, which series.py turns into a gap, never a zero; a plain
decode between verify steps draws 0 drafted. series.py appends these declarations to its own.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

FIELDS = ("draft_len", "draft_kept")

SERIES: tuple[tuple[str, Callable[[dict[str, float]], float]], ...] = (
    ("spec_drafted", itemgetter("draft_len")),
    ("spec_kept", itemgetter("draft_kept")),
)

# Not "needs expert streaming": the lane is empty while speculation is off, streaming or not.
UNMEASURED = "speculation is off\n(Settings: Speculative decoding)"
# (key, title, unit, curves as (column, name, colour)): series.py builds its PlotSpec from it.
PLOT = ("spec", "Speculation per decode", "tokens", (
    ("spec_drafted", "drafted", "#9e9e9e"),
    ("spec_kept", "kept", "#00bcd4"),
))
