"""Recording the full logits each token is picked from, for the bit-exactness tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


@contextmanager
def recorded_logits(session) -> Iterator[list[np.ndarray]]:
    """While active, every token `session` picks appends a copy of the logits it came from."""
    logits: list[np.ndarray] = []
    pick, pick_row = session._pick_token, session._pick_row

    def recording_pick() -> int:
        logits.append(session._p.ctx.logits().copy())
        return pick()

    def recording_pick_row(row: int) -> int:  # a speculative verify step's picks, in order
        logits.append(session._p.ctx.logits_ith(row).copy())
        return pick_row(row)

    session._pick_token = recording_pick
    session._pick_row = recording_pick_row
    try:
        yield logits
    finally:
        del session._pick_token
        del session._pick_row
