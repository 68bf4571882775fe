"""The window lists and marks a slow token only when it is slow in absolute and relative terms,
and only the slowest few (issue 39: 213 markers, lists under 7-token answers and 25 ms tokens)."""

from __future__ import annotations

from workbench.bench.stalls import WINDOW_LIST, explain_answer
from workbench.ui.stalls.noteworthy import MIN_TOKENS, MIN_WALL_MS, noteworthy


def _rows(walls: list[float]) -> list[dict[str, float]]:
    return [{"step": i + 1, "turn": 0, "wall_ms": w, "cpu_ms": 2 * w, "loop_overhead_ms": 0.1}
            for i, w in enumerate(walls)]


def test_a_short_answer_lists_nothing() -> None:
    walls = [10.0] * (MIN_TOKENS - 2) + [400.0]
    e = explain_answer(_rows(walls))
    assert e.slow  # explain calls it slow...
    assert noteworthy(e).listed == ()  # ...the window does not, with no median to speak of


def test_a_fast_token_twice_the_median_is_not_listed() -> None:
    e = explain_answer(_rows([10.0] * 30 + [25.0]))
    assert [t.wall_ms for t in e.slow] == [25.0]
    assert noteworthy(e).listed == ()
    assert MIN_WALL_MS > 25.0


def test_only_the_slowest_few_are_listed_and_the_rest_counted() -> None:
    walls = [10.0] * 300 + [60.0 + i for i in range(213)]
    chosen = noteworthy(explain_answer(_rows(walls)))
    assert len(chosen.listed) == WINDOW_LIST and chosen.more == 213 - WINDOW_LIST
    assert [t.wall_ms for t in chosen.listed] == [60.0 + i for i in range(208, 213)]
