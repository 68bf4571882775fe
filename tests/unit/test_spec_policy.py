"""Speculation's pure parts: the n-gram drafter's rule, the accept rule, the draft policy."""

from __future__ import annotations

import pytest

from workbench.engine.spec import ngram as ng
from workbench.engine.spec import speculator
from workbench.engine.spec.ngram import ngram_draft
from workbench.engine.spec.policy import MAX_COOLDOWN, DraftPolicy
from workbench.engine.spec.speculator import Speculator, accept


def test_proposes_what_followed_the_earlier_occurrence_of_the_tail() -> None:
    assert ngram_draft([1, 2, 3, 4, 5, 9, 1, 2, 3], 2) == [4, 5]
    assert ngram_draft([1, 2, 3, 4, 5, 9, 1, 2, 3], 10) == [4, 5, 9, 1, 2, 3]  # clipped at end


def test_below_the_minimum_match_nothing_is_drafted() -> None:
    assert ngram_draft([1, 2, 7, 8, 1, 2], 4) == []  # a 2-token match
    assert ngram_draft([1, 2, 7, 8, 1, 2], 4, min_match=2) == [7, 8, 1, 2]
    assert ngram_draft([1, 2, 3], 4) == [] and ngram_draft([], 4) == []
    assert ngram_draft([1, 2, 3, 4, 1, 2, 3], 0) == []


def test_the_longest_match_wins_and_a_tie_goes_to_the_most_recent() -> None:
    # "2 3 4" occurs twice; only the first occurrence extends to "1 2 3 4".
    assert ngram_draft([1, 2, 3, 4, 50, 0, 2, 3, 4, 60, 1, 2, 3, 4], 1) == [50]
    # Two equally long matches: the later one's continuation.
    assert ngram_draft([2, 3, 4, 50, 0, 2, 3, 4, 60, 9, 2, 3, 4], 1) == [60]


def test_a_match_may_overlap_the_tail() -> None:
    assert ngram_draft([7, 7, 7, 7, 7], 3) == [7]  # the run 7 7 7 at 1..3 is followed by one 7


def test_the_match_is_capped_at_max_match() -> None:
    seq = list(range(20))
    corpus = [*seq, 99, *seq]  # the whole tail matches 20 tokens back; only 12 are compared
    assert ngram_draft(corpus, 1) == [99]
    assert ng.MAX_MATCH == 12


def test_accept_keeps_the_agreeing_prefix_and_returns_the_models_next_pick() -> None:
    picks = [5, 6, 9, 4]
    read: list[int] = []

    def pick_row(i: int) -> int:
        read.append(i)
        return picks[i]

    assert accept([5, 6, 7], pick_row) == (2, 9)
    assert read == [0, 1, 2]  # no row past the first disagreement is read
    read.clear()
    assert accept([5, 6, 9], pick_row) == (3, 4)  # all kept: the pick after the last draft
    assert accept([], pick_row) == (0, 5)


def test_the_debug_verifier_really_is_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speculator, "DEBUG_KEEP_FIRST_REJECTED", True)
    assert accept([5, 7], lambda i: [5, 6, 9][i]) == (2, 9)


def test_the_policy_grows_on_full_acceptance_and_cuts_to_what_was_kept() -> None:
    p = DraftPolicy(draft_max=8)
    assert p.budget(100) == 4  # the first draft is short: long ones are earned
    p.observe(4, 4)
    assert p.budget(100) == 8
    p.observe(8, 5)
    assert p.budget(100) == 6  # kept 5: the next draft is 5 + 1
    p.observe(4, 4)
    assert p.budget(100) == 8  # doubled, capped at draft_max
    assert p.budget(3) == 2  # never past the answer's remaining tokens (minus the fed one)
    assert p.budget(1) == 0


def test_misses_pause_drafting_for_a_doubling_cool_down() -> None:
    p = DraftPolicy(draft_max=4)
    pauses = []
    for _ in range(9):
        assert p.budget(100) > 0
        p.observe(p.length, 0)
        skipped = 0
        while p.budget(100) == 0:
            skipped += 1
        pauses.append(skipped)
        p.length = 1  # budget() above already consumed one drafting step; keep it comparable
    assert pauses[:4] == [1, 2, 4, 8]
    assert max(pauses) == MAX_COOLDOWN
    p.observe(1, 1)  # a hit resets the streak
    p.observe(1, 0)
    assert p.cooldown == 1


def test_a_draft_mostly_rejected_counts_as_a_miss() -> None:
    p = DraftPolicy(draft_max=8)
    p.observe(8, 3)  # under half kept: a miss, drafting pauses
    assert p.cooldown == 1 and p.length == 4
    assert p.budget(100) == 0 and p.budget(100) == 4
    p.observe(4, 2)  # half kept: not a miss
    assert p.cooldown == 0 and p.miss_streak == 0


class _Fixed:
    kind = "ngram"

    def __init__(self, draft: list[int]) -> None:
        self._draft = draft

    def draft(self, context: list[int], n: int) -> list[int]:
        return self._draft[:n]

    def close(self) -> None:
        pass


def test_a_drafted_end_of_generation_token_is_cut_with_what_follows() -> None:
    spec = Speculator(_Fixed([4, 5, 2, 6]), 8, is_eog=lambda t: t == 2)
    assert spec.propose([1], 3, 100) == [4, 5]
