"""Scrolling the settings panel with the mouse wheel scrolls it; it does not edit the spin box or
combo box that passes under the pointer. A focused editor still takes the wheel."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QComboBox, QDoubleSpinBox, QScrollArea, QWidget

from workbench.config import Config
from workbench.ui.settings.qt_settings_panel import QtSettingsPanel

# One of each kind the panel builds: a spin box, the rung combo ("Drop cold experts"), a choice.
FIELDS = {"n_threads": "spin", "drop_cold_frac": "combo", "dense_weights": "combo"}
# Streaming with a cache turns on the rows of the rung combo and the choice (both start disabled).
CONFIG = Config(moe_stream=True, cache_mb=512)


def field_of(panel: QtSettingsPanel, name: str) -> QDoubleSpinBox | QComboBox:
    field = getattr(panel.rows[name].editor, FIELDS[name])
    assert isinstance(field, QDoubleSpinBox | QComboBox), name
    return field


def wheel_delta(field: QDoubleSpinBox | QComboBox) -> int:
    """A notch that would change the field: down steps a combo to the next item, up a spin box."""
    if isinstance(field, QComboBox):
        return -120 if field.currentIndex() < field.count() - 1 else 120
    return 120 if field.value() < field.maximum() else -120


def turn_wheel(field: QWidget, delta: int) -> None:
    """Through the platform layer, as a mouse does: Qt then gives focus on the wheel to a
    Qt.WheelFocus widget, and passes an ignored event on to the parents (neither happens for
    an event sent straight to the widget)."""
    window = field.window()
    handle = window.windowHandle()
    assert handle is not None
    at = field.mapTo(window, field.rect().center())
    QTest.wheelEvent(handle, QPointF(at), QPoint(0, delta))
    QApplication.processEvents()


@pytest.fixture
def panel(qtbot) -> QtSettingsPanel:
    widget = QtSettingsPanel(CONFIG)
    qtbot.addWidget(widget)
    widget.resize(520, 360)  # far shorter than its rows: the panel scrolls
    widget.show()
    qtbot.waitExposed(widget)
    return widget


@pytest.mark.parametrize("name", list(FIELDS))
def test_the_wheel_scrolls_past_an_unfocused_editor_and_edits_a_focused_one(qtbot, panel, name):
    row = panel.rows[name]
    assert row.active, f"{name} is disabled under {CONFIG}"
    field = field_of(panel, name)
    scroll = panel.findChild(QScrollArea)
    assert scroll is not None
    scroll.ensureWidgetVisible(field, 0, 150)  # room to scroll either way
    bar = scroll.verticalScrollBar()
    delta = wheel_delta(field)
    before, position = row.editor.value(), bar.value()

    turn_wheel(field, delta)
    assert not field.hasFocus()  # the wheel did not take focus, as Qt.WheelFocus would
    assert row.editor.value() == before
    assert bar.value() != position  # the event went on to the scroll area

    field.setFocus()
    qtbot.waitUntil(field.hasFocus)
    position = bar.value()
    turn_wheel(field, delta)
    assert row.editor.value() != before
    assert bar.value() == position
