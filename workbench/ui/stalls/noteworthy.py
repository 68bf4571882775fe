"""Which of an answer's slow tokens the window lists and marks (Qt-free).

`explain_answer` calls a token slow at twice its answer's median, which is right for
`workbench explain` but noise in the window: a 25 ms token at 110 tok/s is "slow", and a
7-token answer has no median worth the name. The window shows a token only when it is slow in
both terms (relative: the explanation's threshold; absolute: a hitch a reader can see), and
only the slowest few of those, saying how many more there are (213 markers buried the lines).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from workbench.bench.stalls import WINDOW_LIST, Explanation, SlowToken

MIN_TOKENS = 8  # fewer tokens than this give no median to be slow against
MIN_WALL_MS = 50.0  # a pause a reader sees in streaming text (20 tok/s)


@dataclass(frozen=True, slots=True)
class NoteworthyStalls:
    listed: tuple[SlowToken, ...]  # the slowest few, in answer order
    more: int  # noteworthy tokens not listed (and not marked)

    @property
    def total(self) -> int:
        return len(self.listed) + self.more


def noteworthy(e: Explanation, limit: int = WINDOW_LIST) -> NoteworthyStalls:
    if e.n_tokens < MIN_TOKENS:
        return NoteworthyStalls((), 0)
    slow = tuple(t for t in e.slow if t.wall_ms >= MIN_WALL_MS)
    chosen = replace(e, slow=slow).worst(limit)
    return NoteworthyStalls(tuple(chosen), len(slow) - len(chosen))
