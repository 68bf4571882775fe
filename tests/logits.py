"""Recording the full logits each token is picked from, for the bit-exactness tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


@contextmanager
def recorded_logits(session) -> Iterator[list[np.ndarray]]:
    """While active, every token `session` picks appends a copy of the logits it came from."""
    logits: list[np.ndarray] = []
    pick = session._pick_token

    def recording_pick() -> int:
        logits.append(session._ctx.logits().copy())
        return pick()

    session._pick_token = recording_pick
    try:
        yield logits
    finally:
        del session._pick_token
