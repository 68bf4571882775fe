"""The plot panel on its own: frames spread over ticks, x ranges kept in step without links."""

from __future__ import annotations

import pytest

from workbench.ui.telemetry.qt_telemetry_panel import PLOTS_PER_TICK, QtTelemetryPanel
from workbench.ui.ui_pacer import UiPacer


def row(i: int) -> dict[str, float]:
    """A streamed token's row: every plot has something to draw."""
    return {"wall_ms": 20.0 + i % 5, "compute_ms": 15.0, "io_ms": 4.0, "mgmt_ms": 0.5,
            "read_bytes": 3 << 20, "cache_hit_pct": 80.0, "rss_anon_mib": 400.0,
            "rss_file_mib": 200.0, "swap_mib": 0.0, "mem_available_mib": 3000.0,
            "majflt": 2, "cpu_ms": 38.0, "loop_overhead_ms": 0.3}


@pytest.fixture
def panel(qtbot) -> QtTelemetryPanel:
    # A pacer that never stretches: these tests are about the frame, not the budget.
    panel = QtTelemetryPanel(pacer=UiPacer(target_share=10.0))
    panel._repaint_timer.stop()  # ticks are driven by hand
    qtbot.addWidget(panel)
    panel.resize(620, 900)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def x_ranges(panel: QtTelemetryPanel) -> dict[str, tuple[float, float]]:
    return {k: tuple(p.getViewBox().viewRange()[0]) for k, p in panel.plots.items()}


def newest_x(panel: QtTelemetryPanel, key: str) -> float:
    ends = [item.xData[-1] for item, _ in panel._plot_curves[key]
            if item.xData is not None and len(item.xData)]
    return max(ends) if ends else -1.0


def test_a_frame_is_spread_over_ticks(panel) -> None:
    panel.begin_turn()
    for i in range(300):
        panel.append(row(i))
    ticks = 0
    while panel._stale or panel._dirty:
        before = {k: newest_x(panel, k) for k in panel.plots}
        panel._tick()
        ticks += 1
        changed = [k for k in panel.plots if newest_x(panel, k) != before[k]]
        assert 0 < len(changed) <= PLOTS_PER_TICK
        assert ticks <= 8
    assert ticks == len(panel.plots) // PLOTS_PER_TICK  # a frame spans several ticks
    assert ticks > 1
    # The measured plots reach the newest token; all eight show the same tokens.
    assert newest_x(panel, "wall") == 299
    ranges = set(x_ranges(panel).values())
    assert len(ranges) == 1
    lo, hi = ranges.pop()
    assert lo < 299 < hi


def test_a_pan_on_one_plot_moves_all_and_stops_following(panel) -> None:
    panel.begin_turn()
    for i in range(300):
        panel.append(row(i))
    panel.repaint()
    view = panel.plots["rss"].getViewBox()
    view.setXRange(10, 60, padding=0)
    view.sigRangeChangedManually.emit(view.state["mouseEnabled"])
    assert not panel.following
    assert set(x_ranges(panel).values()) == {(10.0, 60.0)}
    # New tokens no longer move the view.
    panel.append(row(300))
    while panel._stale or panel._dirty:
        panel._tick()
    assert set(x_ranges(panel).values()) == {(10.0, 60.0)}
    panel.set_following(True)
    while panel._stale or panel._dirty:
        panel._tick()
    lo, hi = x_ranges(panel)["cpu"]
    assert lo < 300 < hi and len(set(x_ranges(panel).values())) == 1


def test_a_highlighted_token_is_brought_into_view_on_every_plot(panel) -> None:
    panel.begin_turn()
    for i in range(600):
        panel.append(row(i))
    panel.repaint()
    panel.highlight(20)
    assert panel.highlighted_x == 20
    for lo, hi in x_ranges(panel).values():
        assert lo <= 20 <= hi


def test_shift_drag_selects_a_span_and_a_click_clears_it(panel, qtbot) -> None:
    from PySide6.QtCore import QPoint, QPointF, Qt

    panel.begin_turn()
    for i in range(100):
        panel.append(row(i))
    panel.repaint()
    qtbot.wait(50)  # the new ranges reach the views' transforms
    spans: list[tuple[int, int]] = []
    panel.span_selected.connect(lambda a, b: spans.append((a, b)))
    view_box = panel.plots["wall"].getViewBox()
    graphics = panel.graphics

    def at(x: float) -> QPoint:
        y = sum(view_box.viewRange()[1]) / 2
        return graphics.mapFromScene(view_box.mapViewToScene(QPointF(x, y)))

    def drag(start: QPoint, end: QPoint, modifier: Qt.KeyboardModifier) -> None:
        qtbot.mousePress(graphics.viewport(), Qt.MouseButton.LeftButton, modifier, start)
        for step in range(1, 6):
            qtbot.mouseMove(graphics.viewport(), start + (end - start) * step / 5)
        qtbot.mouseRelease(graphics.viewport(), Qt.MouseButton.LeftButton, modifier, end)

    left = Qt.MouseButton.LeftButton
    before = view_box.viewRange()[0]
    drag(at(20), at(40), Qt.KeyboardModifier.ShiftModifier)
    assert spans, "Shift+drag selected nothing"
    first, last = spans[-1]
    assert abs(first - 20) <= 1 and abs(last - 40) <= 1
    assert panel.span is not None and panel.span.tokens == last - first + 1
    assert panel.span_readout.isVisible()
    assert panel.span_readout.text().startswith(f"tokens {first}–{last} ({last - first + 1}, ")
    assert view_box.viewRange()[0] == before  # selecting did not pan
    qtbot.mouseClick(graphics.viewport(), left, Qt.KeyboardModifier.NoModifier, at(60))
    assert spans[-1] == (-1, -1) and panel.span is None
    assert not panel.span_readout.isVisible()
    drag(at(20), at(40), Qt.KeyboardModifier.NoModifier)  # the control: a plain drag pans
    assert spans[-1] == (-1, -1) and view_box.viewRange()[0][0] < before[0] - 5

