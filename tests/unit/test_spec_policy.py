"""Speculation's pure parts: the n-gram drafter's rule, the accept rule, the draft policy."""

from __future__ import annotations

import pytest

from workbench.engine.speculation import ngram as ng
from workbench.engine.speculation import speculator
from workbench.engine.speculation.ngram import ngram_draft
from workbench.engine.speculation.policy import MAX_COOLDOWN, DraftPolicy, best_length
from workbench.engine.speculation.speculator import Speculator, accept


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
    p.observe(8, 7)
    assert p.length == 8  # kept 7: the next draft at most 7 + 1 (here the acceptance picks less)
    p.observe(4, 4)
    assert p.length == 8  # doubled, capped at draft_max
    assert p.budget(3) == 2  # never past the answer's remaining tokens (minus the fed one)
    assert p.budget(1) == 0


def test_the_best_length_is_the_one_that_pays_most() -> None:
    assert best_length(1.0, 0.6, 32) == 32  # every draft kept: the longest
    assert best_length(0.5, 0.6, 32) == 0  # half kept at 0.6 a row: plain decoding wins
    # 0.93 kept at 0.6 a row: 3 tokens give 3.66 for 2.8 decodes, the best ratio (1.31).
    assert best_length(0.93, 0.6, 32) == 3
    assert best_length(0.93, 0.1, 32) > 3  # cheaper rows: longer drafts pay
    assert best_length(0.93, 0.6, 2) == 2  # never past the cap


def test_a_rejection_keeps_drafts_short_though_doubling_would_have_grown_them() -> None:
    def after(steps: list[tuple[int, int]]) -> int:
        p = DraftPolicy(draft_max=32)
        for drafted, kept in steps:
            while p.budget(100) == 0:
                pass
            p.observe(drafted, kept)
        return p.budget(100)

    # Doubling alone would allow 8 after 1, 2 and 4 kept; the rejection before them says a
    # token is kept with p ~0.93, where 3 tokens pay best.
    assert after([(4, 1), (1, 1), (2, 2), (4, 4)]) == 3
    assert after([(4, 4), (8, 8)]) == 16  # negative control: nothing rejected, all doubling


def test_misses_pause_drafting_for_a_doubling_cool_down() -> None:
    p = DraftPolicy(draft_max=4)
    pauses = []
    for _ in range(9):
        skipped, drafted = 0, p.budget(100)
        while drafted == 0:
            skipped += 1
            drafted = p.budget(100)
        if pauses or skipped:
            pauses.append(skipped)
        p.observe(drafted, 0)
    assert pauses[:4] == [1, 2, 4, 8]
    assert max(pauses) == MAX_COOLDOWN
    while p.budget(100) == 0:
        pass
    p.observe(1, 1)  # a hit resets the streak
    p.observe(1, 0)
    assert p.cooldown == 1


def test_where_no_draft_is_expected_to_pay_it_pauses_then_probes_with_one_token() -> None:
    # A quarter of drafted tokens kept lately, a second row costing 0.8 of a decode.
    p = DraftPolicy(draft_max=8, length=4, kept=1.0, broken=3.0)
    p.timed(1, 10_000_000)
    p.timed(2, 18_000_000)
    assert best_length(p.p_keep, p.step_cost(2) - 1, 4) == 0
    streak = p.miss_streak
    budgets = []
    for _ in range(40):
        budgets.append(p.budget(100))
        if budgets[-1]:
            assert budgets[-1] == 1  # the probe: one token
            p.observe(1, 0)
    assert budgets.count(1) >= 2 and budgets.count(0) > 30
    assert p.miss_streak > streak + 2  # the pauses without drafting count as misses too
    # A probe that is kept paid for itself, but one kept token does not make drafting pay: the
    # next step pauses again rather than drafting at a loss.
    q = DraftPolicy(draft_max=8, length=4, kept=1.0, broken=3.0, probe_due=True)
    q.timed(1, 10_000_000)
    q.timed(2, 18_000_000)
    assert q.budget(100) == 1
    q.observe(1, 1)
    assert q.p_keep < 0.5 and q.budget(100) == 0


def test_a_step_that_did_not_pay_is_a_miss_by_this_machines_own_costs() -> None:
    p = DraftPolicy(draft_max=8)
    p.observe(8, 3)  # 4 tokens for 1 + 8 * 0.6 (the prior) = 5.8 decodes: a miss
    assert p.cooldown == 1 and p.length == 4
    assert p.budget(100) == 0 and p.budget(100) >= 1

    def step(plain_ms: float, verify_ms: float) -> DraftPolicy:
        q = DraftPolicy(draft_max=8)
        q.timed(1, int(plain_ms * 1e6))
        q.timed(5, int(verify_ms * 1e6))
        q.observe(4, 2)  # 3 tokens from a 5-token verify step
        return q

    cheap = step(10, 14)  # rows past the first add 0.1 decode each: the step cost 1.4
    assert cheap.step_cost(5) == pytest.approx(1.4)
    assert cheap.cooldown == 0 and cheap.miss_streak == 0
    dear = step(10, 50)  # a batch costs in proportion to its tokens: 5 decodes for 3 tokens
    assert dear.step_cost(5) == pytest.approx(5.0)
    assert dear.cooldown == 1 and dear.miss_streak == 1


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
