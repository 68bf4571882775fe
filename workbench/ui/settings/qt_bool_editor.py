"""A bool setting: a check box."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QWidget

from workbench.config import Setting


class QtBoolEditor(QWidget):
    changed = Signal(object)  # the new value, on user edits only

    def __init__(self, setting: Setting, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setting = setting
        self.box = QCheckBox("on")
        self.box.toggled.connect(lambda on: self.changed.emit(bool(on)))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.box)
        layout.addStretch(1)

    def set_value(self, value: Any) -> None:
        with QSignalBlocker(self.box):  # showing a value is not an edit: no echo back
            self.box.setChecked(bool(value) if isinstance(value, bool) else False)

    def value(self) -> bool:
        return self.box.isChecked()
