"""A setting with declared rungs: a combo box of the rung labels that stores the rung's value.

"Drop cold experts" offers off / 50 % / 75 % / 100 % and stores 0.0 / 0.5 / 0.75 / 1.0. A value
between rungs (from the CLI or a preset) is shown as its own entry, so it is never silently
rounded to a rung.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QWidget

from workbench.config import Setting, format_value, type_ok


class QtRungEditor(QWidget):
    changed = Signal(object)

    def __init__(self, setting: Setting, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setting = setting
        self.combo = QComboBox()
        for value, label in setting.rungs:
            self.combo.addItem(label, value)
        self._n_rungs = len(setting.rungs)
        self.combo.currentIndexChanged.connect(lambda _: self.changed.emit(self.value()))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.combo)
        layout.addStretch(1)

    def set_value(self, value: Any) -> None:
        if not type_ok(self.setting, value):
            return  # a wrong type from a preset stays pending; validate() reports it
        with QSignalBlocker(self.combo):
            while self.combo.count() > self._n_rungs:  # a previous off-rung value
                self.combo.removeItem(self._n_rungs)
            index = next((i for i in range(self._n_rungs) if self.combo.itemData(i) == value), -1)
            if index < 0:
                self.combo.addItem(format_value(self.setting, value), value)
                index = self._n_rungs
            self.combo.setCurrentIndex(index)

    def value(self) -> Any:
        return self.combo.currentData()
