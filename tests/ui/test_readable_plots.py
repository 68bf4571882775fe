"""Plots that stay readable (issue 39): one early 3 s token no longer pins the wall axis at
4000 ms (it is clipped and flagged), and a new chat shows none of the last chat's figures,
x axis or scale."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ui.test_telemetry_panel import row, shown_panel
from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel
from workbench.ui.telemetry.view_range import follow_x_range, y_scale
from workbench.ui.ui_pacer import UiPacer


@pytest.fixture
def panel(qtbot) -> QtTelemetryPanel:
    return shown_panel(qtbot, UiPacer(target_share=10.0))


def _wall_top(panel: QtTelemetryPanel) -> float:
    return panel.plots["wall"].getViewBox().viewRange()[1][1]


def test_one_outlier_is_clipped_and_flagged(panel) -> None:
    panel.begin_turn()
    panel.append({**row(0), "wall_ms": 3000.0})  # an early 3 s token...
    for i in range(1, 120):
        panel.append({**row(i), "wall_ms": 10.0 + i % 3})  # ...then 10 ms ones
    panel.repaint()
    top = _wall_top(panel)
    assert top <= 100  # the 10 ms tokens fill the plot, not its bottom 0.3 %
    assert panel.clipped["wall"] == 1
    flag = panel._clip_labels["wall"]
    assert flag.isVisible() and "1 above the axis" in flag.toPlainText()
    assert "3000" in flag.toPlainText()
    # A plot with no outlier is not flagged and shows its peak.
    assert panel.clipped["rss"] == 0 and not panel._clip_labels["rss"].isVisible()


def test_an_even_spread_is_not_clipped() -> None:
    values = np.linspace(5, 60, 100)
    scale = y_scale([values])
    assert scale.clipped == 0 and scale.top >= 60
    # Few points: nothing is called an outlier.
    assert y_scale([np.array([10.0, 3000.0])]).clipped == 0


def test_a_new_chat_resets_the_headline_and_the_axes(panel) -> None:
    from workbench.engine.metrics import TokenMetrics

    panel.begin_turn()
    for i in range(700):  # past the first page: the x axis has moved on
        panel.append(TokenMetrics(step=i + 1, steps=700, turn=0, wall_ms=20.0, cpu_ms=30.0,
                                  majflt=0, majflt_mib=0.0, loop_overhead_ms=0.5))
    panel.repaint()
    panel._show_headline()
    assert panel.headline_row.values["tok/s"].text() != "–"
    assert panel.plots["wall"].getViewBox().viewRange()[0][0] > 100
    panel.clear()
    assert panel.headline_row.values["tok/s"].text() == "–"
    assert panel.headline_row.values["loop overhead"].text() == "–"
    lo, hi = follow_x_range(0, 0)
    for plot in panel.plots.values():
        assert plot.getViewBox().viewRange()[0] == pytest.approx([lo, hi], abs=1e-6)
    assert _wall_top(panel) == pytest.approx(1.0)
