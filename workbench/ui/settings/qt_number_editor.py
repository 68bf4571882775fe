"""An int or float setting: free numbers in a spin box, or a fixed ladder of rungs in a combo box.

One QDoubleSpinBox serves both types (0 decimals for ints): QSpinBox stops at 2**31 - 1 and
the seed goes to 2**32 - 2. A special value at the bottom of the range (0 = greedy, -1 =
random) is shown in words by the spin box itself; the row's hint lists every special value.

A setting that declares rungs offers only those: "Drop cold experts" shows off / 50 % / 75 % /
100 % and stores 0.0 / 0.5 / 0.75 / 1.0. A value between rungs (from the CLI or a preset) is
shown as its own entry, so it is never silently rounded to a rung.

Both take the mouse wheel only once focused (qt_focus_wheel.py), as the panel scrolls.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QWidget

from workbench.config import Setting, format_value, type_ok
from workbench.ui.settings.qt_focus_wheel import QtFocusComboBox, WheelNeedsFocus

INT_LIMIT = 2**31 - 1  # an undeclared upper bound; far above any sensible count
FLOAT_DECIMALS = 2
FLOAT_STEP = 0.05


class _SpinBox(WheelNeedsFocus, QDoubleSpinBox):
    def __init__(self, setting: Setting) -> None:
        super().__init__()
        self.is_int = setting.type == "int"
        self.setDecimals(0 if self.is_int else FLOAT_DECIMALS)
        self.setSingleStep(1 if self.is_int else FLOAT_STEP)
        low = setting.min if setting.min is not None else -INT_LIMIT
        high = setting.max if setting.max is not None else INT_LIMIT
        self.setRange(float(low), float(high))
        if setting.unit:
            self.setSuffix(f" {setting.unit}")
        specials = dict(setting.special)
        if setting.min is not None and setting.min in specials:
            self.setSpecialValueText(f"{specials[setting.min]}")
        self.setMinimumWidth(140)

    def show_number(self, value: int | float) -> None:
        self.setValue(float(value))

    def number(self) -> int | float:
        v = self.value()
        # The box holds a double: hand back the setting's own type at the precision it shows.
        return round(v) if self.is_int else round(v, FLOAT_DECIMALS)


class _RungBox(QtFocusComboBox):
    """The declared rungs by label, each carrying its value; at most one extra off-rung entry."""

    def __init__(self, setting: Setting) -> None:
        super().__init__()
        self.setting = setting
        for value, label in setting.rungs:
            self.addItem(label, value)
        self.n_rungs = len(setting.rungs)

    def show_number(self, value: int | float) -> None:
        while self.count() > self.n_rungs:  # a previous off-rung value
            self.removeItem(self.n_rungs)
        index = next((i for i in range(self.n_rungs) if self.itemData(i) == value), -1)
        if index < 0:
            self.addItem(format_value(self.setting, value), value)
            index = self.n_rungs
        self.setCurrentIndex(index)

    def number(self) -> int | float:
        return self.currentData()


class QtNumberEditor(QWidget):
    changed = Signal(object)

    def __init__(self, setting: Setting, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setting = setting
        # `spin` and `combo` are the handles a caller drives; `_field` is whichever was built, so
        # showing and reading a value need no branch on the mode.
        self.spin: _SpinBox | None = None
        self.combo: _RungBox | None = None
        self._field: _SpinBox | _RungBox
        if setting.rungs:
            self.combo = self._field = _RungBox(setting)
            self.combo.currentIndexChanged.connect(self._edited)
        else:
            self.spin = self._field = _SpinBox(setting)
            self.spin.valueChanged.connect(self._edited)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._field)
        layout.addStretch(1)

    def _edited(self, _: object) -> None:
        self.changed.emit(self.value())

    def set_value(self, value: Any) -> None:
        if not type_ok(self.setting, value):
            return  # a wrong type from a preset stays pending; validate() reports it
        with QSignalBlocker(self._field):
            self._field.show_number(value)

    def value(self) -> int | float:
        return self._field.number()
