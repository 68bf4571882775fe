"""`bench threads`' figures from injected runs: the count it marks chosen is the fastest by
median, the default is called out when it measured slower, and ratios are to the fastest."""

from __future__ import annotations

import pytest

from workbench.bench.threads import Run, figures


def runs_at(s_per_token: dict[int, list[float]], tokens: int = 64) -> dict[int, list[Run]]:
    return {c: [Run(tokens, s * tokens, 0.25 * s * tokens, 0.75 * s * tokens) for s in ss]
            for c, ss in s_per_token.items()}


def test_the_fastest_median_is_chosen_and_a_slower_default_is_called_out():
    # 4 threads is the fastest by median although 8 has the single fastest run (an outlier).
    report = figures(runs_at({2: [0.020, 0.021, 0.020], 4: [0.010, 0.011, 0.010],
                              8: [0.005, 0.013, 0.014]}), arrangement="streamed", default=8)
    assert report.chosen == 4
    by = {c.threads: c for c in report.counts}
    assert by[4].vs_chosen == pytest.approx(1.0)
    assert by[2].vs_chosen == pytest.approx(0.010 / 0.020)
    assert by[8].vs_chosen == pytest.approx(0.010 / 0.013)  # its one fast run does not count
    assert by[8].fastest == pytest.approx(1 / 0.005) and by[8].slowest == pytest.approx(1 / 0.014)
    assert by[4].tok_s == pytest.approx(1 / 0.010)
    assert by[4].io_ms_per_token == pytest.approx(0.25 * 1e3 * 0.031 / 3, rel=1e-6)
    last = report.lines()[-1]
    assert last.startswith("threads streamed chosen=4 default=8 ")
    assert "the default (8) measured" in last and "of the chosen count (4)" in last
    marked = [ln for ln in report.lines() if "<- " in ln]
    assert any(ln.strip().startswith("4 threads") and "chosen" in ln for ln in marked)
    assert any(ln.strip().startswith("8 threads") and "default" in ln for ln in marked)


def test_a_tie_goes_to_fewer_threads_and_a_default_that_is_the_choice_says_so():
    report = figures(runs_at({1: [0.010, 0.010], 2: [0.010, 0.010]}), arrangement="resident",
                     default=1)
    assert report.chosen == 1
    assert report.lines()[-1].endswith("(the default is the choice)")
