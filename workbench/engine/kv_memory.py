"""The KV memory of one sequence, mirrored by the exact list of tokens it holds.

Keeping the mirror exact is what makes multi-turn reuse safe: a new turn keeps the longest common
prefix of the mirror and its own tokens, removes the divergent tail from the memory, and decodes
only the rest.
"""

from __future__ import annotations

from workbench.backend import llama


def common_prefix(held: list[int], wanted: list[int]) -> int:
    """Tokens of `wanted` the memory can keep: the common prefix, leaving >= 1 token to decode
    (a turn must decode at least one prompt token to have logits to sample from)."""
    n = 0
    limit = min(len(held), len(wanted) - 1)
    while n < limit and held[n] == wanted[n]:
        n += 1
    return n


class KvMemory:
    def __init__(self, ctx: llama.Context) -> None:
        self._ctx = ctx
        self.tokens: list[int] = []

    def reuse_prefix(self, wanted: list[int]) -> int:
        """Cut the memory back to the prefix it shares with `wanted`; returns its length."""
        n = common_prefix(self.tokens, wanted)
        return self.truncate(n)

    def truncate(self, n: int) -> int:
        """Keep positions [0, n); returns what is kept (0 if the memory refused a partial cut)."""
        if n < len(self.tokens):
            if not self._ctx.seq_rm(n, -1):
                # Some memories (sliding-window attention) refuse a partial removal.
                self._ctx.clear()
                n = 0
            del self.tokens[n:]
        return n

    def append(self, tokens: list[int]) -> None:
        self.tokens.extend(tokens)

    def clear(self) -> None:
        self._ctx.clear()
        self.tokens.clear()
