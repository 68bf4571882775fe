"""What a generated token was chosen from: its log-probability and the likeliest alternatives."""

from __future__ import annotations

import math
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

    @property
    def p(self) -> float:
        """The token's probability, in [0, 1]."""
        return math.exp(self.logprob)

    @property
    def text(self) -> str:
        return token_text(self.piece)

    def alternatives(self) -> tuple[tuple[str, float], ...]:
        """The likeliest candidates as (text, probability), best first; the token itself is
        among them when it was one of the likeliest (under greedy decoding, the first)."""
        return tuple((token_text(piece), math.exp(logprob)) for _, piece, logprob in self.top)


def token_text(piece: bytes) -> str:
    """A token as text; a piece that is part of a UTF-8 character is spelt as its bytes, as
    OpenAI does (`bytes:\\xe2\\x80`)."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in piece)
