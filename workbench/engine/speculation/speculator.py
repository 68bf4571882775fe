"""One turn's speculation: a drafter, the policy that sizes its drafts, and the tally.

The verify rule is greedy and exact: row i of the verify batch scores the token after fed[i];
the draft is kept while the model's own pick from row i equals draft[i], and the first pick that
differs (or the pick after the last draft) is the next token, as plain decoding would have
picked it. So the output is the model's greedy output; what changes is how many decodes it took.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workbench.engine.metrics import RunSummary
from workbench.engine.speculation.drafters import Drafter, ModelDrafter, NgramDrafter
from workbench.engine.speculation.policy import DraftPolicy

# A broken verifier, for the identity gate's negative control only: keep the first rejected
# draft as if the model had picked it. Never set outside tests.
DEBUG_KEEP_FIRST_REJECTED = False


@dataclass(slots=True)
class SpecTally:
    """One turn's counts, for its summary."""

    decodes: int = 0  # generation decodes (plain and verify)
    drafted_steps: int = 0  # of those, verify steps (a draft was proposed)
    drafted: int = 0  # tokens proposed
    accepted: int = 0  # of those, kept
    draft_ns: int = 0  # time spent drafting (between decodes, part of the loop overhead)


@dataclass(frozen=True, slots=True)
class Verified:
    fed: list[int]  # the tokens of the batch the memory keeps: the fed token and the kept drafts
    next_token: int  # the model's pick after them
    n_drafted: int
    n_accepted: int


def accept(drafts: list[int], pick_row: Callable[[int], int]) -> tuple[int, int]:
    """(drafts kept, the next token) given the model's pick from each verify row, in order.
    Exactly one pick per kept draft plus one: rows past the first disagreement are not read."""
    for i, draft in enumerate(drafts):
        tok = pick_row(i)
        if tok != draft:
            if DEBUG_KEEP_FIRST_REJECTED:
                return i + 1, pick_row(i + 1)
            return i, tok
    return len(drafts), pick_row(len(drafts))


class Speculator:
    def __init__(self, drafter: Drafter, draft_max: int, is_eog: Callable[[int], bool]) -> None:
        self.drafter = drafter
        self.policy = DraftPolicy(draft_max)
        self.tally = SpecTally()
        self._is_eog = is_eog

    @property
    def kind(self) -> str:
        return self.drafter.kind

    def propose(self, held: list[int], token: int, remaining: int) -> list[int]:
        """The draft to verify after the memory's tokens `held` and the `token` about to be
        decoded (may be empty: decode one token plainly). A drafted end-of-generation token is
        cut with everything after it: plain decoding never feeds one to the model."""
        n = self.policy.budget(remaining)
        if n <= 0:
            return []
        drafts = self.drafter.draft([*held, token], n)[:n]
        for i, tok in enumerate(drafts):
            if self._is_eog(tok):
                return drafts[:i]
        return drafts

    def decoded(self, n_fed: int, ns: int) -> None:
        """A decode of `n_fed` tokens (1: plain; more: a verify step) took `ns`: the policy
        weighs what a draft costs by what decodes cost on this machine."""
        self.policy.timed(n_fed, ns)

    def verify(self, fed0: int, drafts: list[int], pick_row: Callable[[int], int]) -> Verified:
        """Call `decoded` for the verify step first."""
        n_acc, nxt = accept(drafts, pick_row)
        self.policy.observe(len(drafts), n_acc)
        t = self.tally
        t.drafted_steps += 1
        t.drafted += len(drafts)
        t.accepted += n_acc
        return Verified([fed0, *drafts[:n_acc]], nxt, len(drafts), n_acc)


def fill_spec_summary(summary: RunSummary, tally: SpecTally) -> None:
    summary.spec_decodes = tally.decodes
    summary.spec_drafted_steps = tally.drafted_steps
    summary.spec_drafted = tally.drafted
    summary.spec_accepted = tally.accepted
    summary.spec_draft_seconds = tally.draft_ns / 1e9


def speculator_for(mode: str, draft_max: int, sampling: bool, drafter: ModelDrafter | None,
                   is_eog: Callable[[int], bool], constrained: str = ""
                   ) -> tuple[Speculator | None, str]:
    """A turn's speculator for `mode` (the spec setting) and the summary's word for it. Greedy
    only: the verify rule compares argmaxes, so a sampled (or penalised) turn decodes token by
    token, and so does a constrained one (`constrained`: its reason, "off: grammar", from
    engine/constrain.py: neither a grammar's mask nor logprobs survive an argmax check).
    `drafter` is the draft model the session loaded (spec_draft_model), if any."""
    if mode == "off":
        return None, "off"
    if constrained:
        return None, constrained
    if sampling:
        return None, "off: sampling"
    if mode == "draft":
        if drafter is None:  # validate() requires the setting; the open loaded it
            return None, "off: no draft model"
        return Speculator(drafter, draft_max, is_eog), "draft"
    return Speculator(NgramDrafter(), draft_max, is_eog), "ngram"
