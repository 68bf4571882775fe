"""An int or float setting: a spin box with the unit as suffix and special values in words.

One QDoubleSpinBox serves both types (0 decimals for ints): QSpinBox stops at 2**31 - 1 and
the seed goes to 2**32 - 2. A special value at the bottom of the range (0 = greedy, -1 =
random) is shown in words by the spin box itself; the row's hint lists every special value.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QWidget

from workbench.config import Setting, type_ok

INT_LIMIT = 2**31 - 1  # an undeclared upper bound; far above any sensible count
FLOAT_DECIMALS = 2
FLOAT_STEP = 0.05


class _SpinBox(QDoubleSpinBox):
    """Ignores the wheel unless focused, so scrolling the panel does not change settings."""

    def wheelEvent(self, event: QWheelEvent) -> None:
        if self.hasFocus():
            super().wheelEvent(event)
        else:
            event.ignore()


class QtNumberEditor(QWidget):
    changed = Signal(object)

    def __init__(self, setting: Setting, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setting = setting
        self.is_int = setting.type == "int"
        self.spin = _SpinBox()
        self.spin.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.spin.setDecimals(0 if self.is_int else FLOAT_DECIMALS)
        self.spin.setSingleStep(1 if self.is_int else FLOAT_STEP)
        low = setting.min if setting.min is not None else -INT_LIMIT
        high = setting.max if setting.max is not None else INT_LIMIT
        self.spin.setRange(float(low), float(high))
        if setting.unit:
            self.spin.setSuffix(f" {setting.unit}")
        specials = dict(setting.special)
        if setting.min is not None and setting.min in specials:
            self.spin.setSpecialValueText(f"{specials[setting.min]}")
        self.spin.setMinimumWidth(140)
        self.spin.valueChanged.connect(lambda _: self.changed.emit(self.value()))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.spin)
        layout.addStretch(1)

    def set_value(self, value: Any) -> None:
        if not type_ok(self.setting, value):
            return  # a wrong type from a preset stays pending; validate() reports it
        with QSignalBlocker(self.spin):
            self.spin.setValue(float(value))

    def value(self) -> int | float:
        v = self.spin.value()
        return round(v) if self.is_int else round(v, FLOAT_DECIMALS)
