"""The pacer stretches the live views' intervals when the UI thread uses more than its share
of a core, and shrinks them back when there is room (clocks are driven by hand)."""

from __future__ import annotations

import itertools
import math

import pytest

from workbench.ui.ui_pacer import (
    CONTENDED_SHARE,
    MAX_STRETCH,
    SPARE_CORE_SHARE,
    STEP,
    WINDOW_S,
    UiPacer,
    ui_share_target,
)


class Clocks:
    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def advance(self, wall_s: float, cpu_share: float) -> None:
        self.wall += wall_s
        self.cpu += wall_s * cpu_share


def pacer(target: float) -> tuple[UiPacer, Clocks]:
    clocks = Clocks()
    return UiPacer(target, wall=lambda: clocks.wall, cpu=lambda: clocks.cpu), clocks


def test_share_target_depends_on_a_free_core() -> None:
    assert ui_share_target(engine_threads=2, cores=2) == CONTENDED_SHARE
    assert ui_share_target(engine_threads=4, cores=8) == SPARE_CORE_SHARE
    assert ui_share_target(engine_threads=8, cores=8) == CONTENDED_SHARE


def test_an_idle_ui_repaints_at_the_base_rate() -> None:
    p, clocks = pacer(0.03)
    frames = 0
    for _ in range(300):  # 10 s of 33 ms ticks, the UI using 1 % of a core
        frames += p.due("plots", 0.033, 1.0)
        clocks.advance(0.033, 0.01)
    assert p.stretch == 1.0
    assert frames == 300
    assert p.share == pytest.approx(0.01)


def test_a_busy_ui_is_stretched_up_to_the_cap_and_recovers() -> None:
    p, clocks = pacer(0.03)
    for _ in range(200):
        p.due("plots", 0.033, 1.0)
        clocks.advance(0.033, 0.20)  # 20 % of a core: far over the 3 % share
    assert p.stretch == MAX_STRETCH
    assert p.interval(0.033, 1.0) == 1.0  # capped by the view's own maximum
    assert p.interval(0.001, 1.0) == pytest.approx(0.001 * MAX_STRETCH)
    frames = 0
    for _ in range(31):  # one second at the cap: one frame (plus the one that is due now)
        frames += p.due("plots", 0.033, 1.0)
        clocks.advance(0.033, 0.20)
    assert frames in (1, 2)
    # Quiet again: each window shrinks the stretch by STEP until the base rate is back.
    windows = 0
    while p.stretch > 1.0:
        ticks = round(WINDOW_S / 0.033) + 1
        for _ in range(ticks):
            p.due("plots", 0.033, 1.0)
            clocks.advance(0.033, 0.001)
        windows += 1
        assert windows < 20
    # Back from the cap to 1x one STEP per window, not in a jump (our half-second loops do
    # not line up with the pacer's windows: one more may pass).
    steps = math.ceil(math.log(MAX_STRETCH) / math.log(STEP))
    assert steps <= windows <= steps + 1


def test_views_are_paced_independently_with_one_stretch() -> None:
    p, clocks = pacer(0.5)
    assert p.due("plots", 0.033, 1.0)
    assert p.due("text", 0.1, 0.4)  # another view is not held back by the plots' frame
    clocks.advance(0.05, 0.0)
    assert p.due("plots", 0.033, 1.0)
    assert not p.due("text", 0.1, 0.4)
    clocks.advance(0.05, 0.0)
    assert p.due("text", 0.1, 0.4)


def test_a_tick_slightly_early_still_counts() -> None:
    p, clocks = pacer(0.5)
    assert p.due("plots", 0.1, 1.0)
    clocks.advance(0.097, 0.0)  # a timer of 100 ms firing 3 ms early
    assert p.due("plots", 0.1, 1.0)
    clocks.advance(0.05, 0.0)
    assert not p.due("plots", 0.1, 1.0)


def test_the_pace_note_speaks_only_when_a_view_is_slowed() -> None:
    from workbench.ui.ui_pacer import pace_note

    assert pace_note(0.033) == ""
    assert pace_note(2.5) == "refreshing every 2.5 s: the engine is using every core"


def test_an_answer_starts_where_the_last_one_left_the_stretch() -> None:
    p, clocks = pacer(0.03)
    p.answer_started()
    assert p.answering
    for _ in range(200):  # a busy answer takes the stretch to the cap
        p.due("plots", 0.033, 1.0)
        clocks.advance(0.033, 0.20)
    p.answer_ended()
    assert not p.answering  # the plots' "engine is using every core" note goes away
    for _ in range(300):  # idle between answers: the window relaxes
        p.due("plots", 0.033, 1.0)
        clocks.advance(0.033, 0.0)
    assert p.stretch == 1.0
    p.answer_started()
    assert p.stretch == MAX_STRETCH


def test_a_view_sleeping_until_due_keeps_its_interval_however_long_its_frames_take() -> None:
    """Issue 39: a frame spread over ticks took ~0.1 s, and the timer then slept the whole
    interval again, so a view capped at 0.2 s drew every 0.3 s. Sleeping `wait()` counts the
    interval from the frame's start: frames start every interval while the UI is busy."""
    p, clocks = pacer(0.0)  # every window over the target: the stretch sits at its limit
    p.stretch = MAX_STRETCH
    starts = []
    for _ in range(20):
        assert p.due("plots", 0.033, 0.2)
        starts.append(clocks.wall)
        for _ in range(3):  # the frame's other ticks
            clocks.advance(0.033, 0.5)
        clocks.advance(p.wait("plots", 0.033, 0.2), 0.0)  # the timer sleeps until then
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps == pytest.approx([0.2] * len(gaps))
    assert p.wait("never drawn", 0.033, 0.2) == 0.0  # a view never drawn is due now


def test_late_ticks_do_not_slow_the_rate() -> None:
    """On busy cores a timer wakes late; counted from each late wake-up, the lateness added up
    (0.2 s frames came every 0.3 s). Frames are due on a fixed grid: a late one does not delay
    the next, so over many frames the rate is the interval's."""
    p, clocks = pacer(0.0)
    p.stretch = MAX_STRETCH
    starts = []
    while len(starts) < 50:
        if p.due("plots", 0.033, 0.2):
            starts.append(clocks.wall)
        lateness = 0.03 if len(starts) % 2 else 0.01  # every wake-up 10-30 ms late
        clocks.advance(p.wait("plots", 0.033, 0.2) + lateness, 0.0)
    mean_gap = (starts[-1] - starts[0]) / (len(starts) - 1)
    assert mean_gap == pytest.approx(0.2, abs=0.005)
    clocks.advance(5.0, 0.0)  # a pause (nothing to draw): the grid starts again from now
    assert p.due("plots", 0.033, 0.2)
    assert p.wait("plots", 0.033, 0.2) == pytest.approx(0.2)
