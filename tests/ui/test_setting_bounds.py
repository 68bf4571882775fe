"""The settings panel's number editors stop at each setting's declared bounds (issue 12, case 2)."""

from __future__ import annotations

import pytest

from workbench import config as C
from workbench.ui.settings.qt_number_editor import QtNumberEditor


@pytest.mark.parametrize("name", [s.name for s in C.SETTINGS if s.numeric])
def test_every_number_editor_has_the_declared_range(qtbot, name):
    s = C.BY_NAME[name]
    editor = QtNumberEditor(s)
    qtbot.addWidget(editor)
    assert s.max is not None, f"{name} has no upper bound"
    assert editor.spin.maximum() == float(s.max)
    editor.set_value(type(s.default)(s.max * 10 + 10))  # a preset holding a wild value
    assert editor.value() <= s.max
