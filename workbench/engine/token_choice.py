"""What a generated token was chosen from: its log-probability and the likeliest alternatives."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TokenChoice:
    """One generated token's log-probability and its likeliest alternatives (best first), each
    as (token id, the token's bytes, log-probability), from the distribution the token was
    drawn from after the sampler's filters and the grammar's mask (engine/constrain.py)."""

    token: int
    piece: bytes
    logprob: float
    top: tuple[tuple[int, bytes, float], ...] = ()
