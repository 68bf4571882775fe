"""The thread count chosen by measurement, tested with injected timings (engine/thread_choice)."""

from __future__ import annotations

import random

import pytest

from workbench.engine import thread_choice as tc


@pytest.mark.parametrize(("cores", "expected"), [
    (1, [1]), (2, [1, 2]), (6, [1, 2, 4, 6]), (16, [1, 2, 4, 8, 16]),
])
def test_candidates_double_up_to_the_core_count(cores: int, expected: list[int]) -> None:
    assert tc.candidates(cores) == expected


def test_measurement_alternates_its_order() -> None:
    calls: list[int] = []

    def step(threads: int) -> float:
        calls.append(threads)
        return 0.01

    samples = tc.measure(step, [1, 2, 4], rounds=3)
    assert calls == [1, 2, 4, 4, 2, 1, 1, 2, 4]
    assert all(len(v) == 3 for v in samples.values())


def test_the_issue_16_core_streamed_row_picks_8_not_16() -> None:
    # issue 38, streamed with cache 200 MiB: 12.2 / 13.3 / 13.2 / 9.7 tok/s at 2/4/8/16 threads.
    rates = {1: 8.0, 2: 12.2, 4: 13.3, 8: 13.2, 16: 9.7}
    choice = tc.probe(lambda t: 1 / rates[t], cores=16)
    assert choice.threads == 4
    assert choice.probe_seconds >= 0
    assert "4:13.3" in choice.reason and "16:9.7" in choice.reason


def test_median_not_mean_and_ties_go_to_fewer_threads() -> None:
    # One slow outlier (a page-cache miss) does not decide; equal medians prefer fewer threads.
    assert tc.choose({2: [0.010, 0.010, 0.500], 4: [0.011, 0.011, 0.011]}).threads == 2
    assert tc.choose({4: [0.02, 0.02], 2: [0.02, 0.02]}).threads == 2


def test_never_picks_a_count_that_measured_slower_than_another() -> None:
    rng = random.Random(38)
    for _ in range(200):
        samples = {c: [rng.uniform(0.005, 0.05) for _ in range(3)] for c in tc.candidates(16)}
        choice = tc.choose(samples)
        assert all(choice.s_per_token[choice.threads] <= m for m in choice.s_per_token.values())


def test_nothing_measured_is_an_error() -> None:
    with pytest.raises(ValueError):
        tc.choose({2: []})
