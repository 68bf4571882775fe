"""The settings panel's number editors stop at each setting's declared bounds (issue 12, case 2)."""

from __future__ import annotations

import pytest

from workbench import config as C
from workbench.ui.settings.qt_number_editor import QtNumberEditor


@pytest.mark.parametrize("name", [s.name for s in C.SETTINGS if s.numeric and not s.rungs])
def test_every_number_editor_has_the_declared_range(qtbot, name):
    s = C.BY_NAME[name]
    editor = QtNumberEditor(s)
    qtbot.addWidget(editor)
    assert s.max is not None, f"{name} has no upper bound"
    assert editor.spin is not None
    assert editor.spin.maximum() == float(s.max)
    editor.set_value(type(s.default)(s.max * 10 + 10))  # a preset holding a wild value
    assert editor.value() <= s.max


@pytest.mark.parametrize("name", [s.name for s in C.SETTINGS if s.rungs])
def test_every_rung_is_in_the_declared_range(qtbot, name):
    # Rungs cannot be typed past a bound, so the bound holds if every rung does; a wild value
    # from a preset is shown as itself (never rounded to a rung) and validate() reports it.
    s = C.BY_NAME[name]
    editor = QtNumberEditor(s)
    qtbot.addWidget(editor)
    assert editor.combo is not None and editor.spin is None
    for value, _ in s.rungs:
        assert C.range_problem(s, value) == "", (name, value)
    assert s.max is not None, f"{name} has no upper bound"
    wild = type(s.default)(s.max * 10 + 10)
    editor.set_value(wild)
    assert editor.value() == wild and editor.combo.count() == len(s.rungs) + 1
    assert C.range_problem(s, wild) != ""
