"""How much to draft: grow the draft while it is accepted, back off when it does not pay.

A verify step costs more than a plain decode (a batch of 1 + k tokens, and with expert streaming
the union of their experts). On this project's 2-core CPU a batch costs nearly in proportion to
its tokens (docs/benchmarks.md: each row past the first adds ~0.55 of a plain decode), so a draft
pays only when enough of it is kept, and how much is enough depends on the machine. The policy
therefore times the decodes themselves: a plain decode's time, and what each row past the first
adds to a verify step (both moving averages over the turn, so I/O a batch causes is billed too).
A verify step *paid* when it gave at least as many tokens (the kept drafts and the model's next
pick) as plain decodes would have in its time.

- A turn's first draft is short (`FIRST_LENGTH`); after a full acceptance the next draft may be
  twice as long (up to `draft_max`); after a partial one it is cut to what was kept plus one.
- Within that, the draft is as long as pays best: with each drafted token kept with probability
  p (estimated from the turn's recent verify steps), a draft of k tokens gives
  (1 - p^(k+1)) / (1 - p) tokens for 1 + k * row cost plain decodes (`best_length`). Text that
  repeats in bursts (a small model's story) thus gets short drafts, not the 16 tokens two lucky
  steps in a row would have earned by doubling alone.
- A step that did not pay is a miss, and so is a step where no length is expected to pay:
  drafting pauses for a cool-down that doubles with every consecutive miss (up to `MAX_COOLDOWN`
  steps) and resets at the next step that paid. After a pause one token is drafted whatever the
  estimate says: the probe that notices when the text starts to repeat.

So on text that never repeats, nearly every step is a plain one-token decode.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_COOLDOWN = 64
FIRST_LENGTH = 4  # a turn's first draft: long ones are earned by being kept, never assumed
# What a verify row past the first costs, in plain decodes, until the turn has timed both kinds
# of decode: this CPU's measured figure (docs/benchmarks.md), rounded up.
PRIOR_ROW_COST = 0.6
SMOOTHING = 0.25  # weight of the newest timing in the moving averages
KEEP_DECAY = 0.8  # per verify step: the acceptance estimate follows the text's recent repeats


def best_length(p_keep: float, row_cost: float, cap: int) -> int:
    """The draft length, 1 to `cap`, that gives most tokens per plain decode's worth of time
    when each drafted token is kept with probability `p_keep` (given the ones before it were);
    0 when none beats plain decoding."""
    best, best_gain = 0, 1.0
    for k in range(1, cap + 1):
        tokens = k + 1.0 if p_keep >= 1.0 else (1.0 - p_keep ** (k + 1)) / (1.0 - p_keep)
        gain = tokens / (1.0 + k * row_cost)
        if gain > best_gain:
            best, best_gain = k, gain
    return best


def _smoothed(average: float, value: float) -> float:
    return value if average < 0 else average + SMOOTHING * (value - average)


@dataclass(slots=True)
class DraftPolicy:
    draft_max: int
    length: int = 0  # the next draft's length (0: FIRST_LENGTH at the first use)
    cooldown: int = 0  # steps left without drafting
    miss_streak: int = 0
    plain_ns: float = -1.0  # a plain decode's time (-1: none timed yet)
    row_ns: float = -1.0  # what a verify row past the first adds (-1: none timed yet)
    kept: float = 0.0  # drafted tokens kept, decayed by KEEP_DECAY each verify step
    broken: float = 0.0  # verify steps that rejected a draft token, decayed alike
    probe_due: bool = False  # a pause ended: draft one token even if none is expected to pay

    def budget(self, remaining: int) -> int:
        """Tokens to draft before the next step (0: decode one token plainly). `remaining` is
        how many tokens the answer may still generate, the one about to be decoded included."""
        if self.cooldown > 0:
            self.cooldown -= 1
            return 0
        if self.length <= 0:
            self.length = min(FIRST_LENGTH, self.draft_max)
        cap = max(0, min(self.length, self.draft_max, remaining - 1))
        if cap <= 0 or self.kept + self.broken <= 0:
            return cap  # nothing to draft, or no verify step to estimate from yet
        best = best_length(self.p_keep, self.row_cost, cap)
        if best > 0:
            return best
        if self.probe_due:  # after a pause one token is drafted: the probe that finds repeats
            self.probe_due = False
            return 1
        self._pause()  # no length pays at this acceptance: a miss without drafting
        return 0

    @property
    def p_keep(self) -> float:
        """How likely a drafted token is kept, given the ones before it were (1 when no draft
        was rejected lately)."""
        seen = self.kept + self.broken
        return self.kept / seen if seen > 0 else 1.0

    def timed(self, n_fed: int, ns: int) -> None:
        """A decode of `n_fed` tokens took `ns` (1: a plain decode; more: a verify step)."""
        if n_fed == 1:
            self.plain_ns = _smoothed(self.plain_ns, ns)
        elif self.plain_ns > 0:
            self.row_ns = _smoothed(self.row_ns, max(0.0, (ns - self.plain_ns) / (n_fed - 1)))

    @property
    def row_cost(self) -> float:
        """What a verify row past the first costs, in plain decodes."""
        measured = self.plain_ns > 0 and self.row_ns >= 0
        return self.row_ns / self.plain_ns if measured else PRIOR_ROW_COST

    def step_cost(self, n_fed: int) -> float:
        """A decode of `n_fed` tokens, in plain decodes."""
        return 1.0 + (n_fed - 1) * self.row_cost

    def observe(self, drafted: int, accepted: int) -> None:
        """What the last verify step kept of its draft (time it first: `timed`)."""
        if drafted <= 0:
            return
        self.kept = self.kept * KEEP_DECAY + accepted
        self.broken = self.broken * KEEP_DECAY + (accepted < drafted)
        if accepted == drafted:
            self.length = min(self.draft_max, max(1, self.length) * 2)
            self.miss_streak = 0
            return
        self.length = accepted + 1
        if accepted + 1 >= self.step_cost(drafted + 1):  # it paid
            self.miss_streak = 0
            return
        self._pause()

    def _pause(self) -> None:
        self.miss_streak += 1
        self.cooldown = min(MAX_COOLDOWN, 1 << (self.miss_streak - 1))
        self.probe_due = True
