"""How much to draft: grow the draft while it is accepted, back off when it is not.

A verify step costs more than a plain decode (a batch of 1 + k tokens, and with expert streaming
the union of their experts), so a draft that is rejected is a loss: on this project's 2-core CPU a
batch costs nearly in proportion to its tokens (docs/benchmarks.md), so only drafts that are
mostly kept pay. The policy keeps speculation paying where drafts hit and near-free where they do
not: a turn's first draft is short (`FIRST_LENGTH`); after a full acceptance the next draft
may be twice as long (up to `draft_max`); after a
partial one it is cut to what was accepted plus one; a draft of which less than `MIN_KEPT` was
kept is a miss, and drafting then pauses for a cool-down that doubles with every consecutive miss
(up to `MAX_COOLDOWN` steps) and resets on the next draft that is not a miss. So on text that
never repeats, nearly every step is a plain one-token decode.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_COOLDOWN = 64
FIRST_LENGTH = 4  # a turn's first draft: long ones are earned by being kept, never assumed
MIN_KEPT = 0.5  # share of a draft that must be kept for the step not to count as a miss


@dataclass(slots=True)
class DraftPolicy:
    draft_max: int
    length: int = 0  # the next draft's length (0: FIRST_LENGTH at the first use)
    cooldown: int = 0  # steps left without drafting
    miss_streak: int = 0

    def budget(self, remaining: int) -> int:
        """Tokens to draft before the next step (0: decode one token plainly). `remaining` is
        how many tokens the answer may still generate, the one about to be decoded included."""
        if self.cooldown > 0:
            self.cooldown -= 1
            return 0
        if self.length <= 0:
            self.length = min(FIRST_LENGTH, self.draft_max)
        return max(0, min(self.length, self.draft_max, remaining - 1))

    def observe(self, drafted: int, accepted: int) -> None:
        """What the last verify step kept of its draft."""
        if drafted <= 0:
            return
        if accepted == drafted:
            self.length = min(self.draft_max, max(1, self.length) * 2)
            self.miss_streak = 0
            return
        self.length = accepted + 1
        if accepted >= MIN_KEPT * drafted:
            self.miss_streak = 0
            return
        self.miss_streak += 1
        self.cooldown = min(MAX_COOLDOWN, 1 << (self.miss_streak - 1))
