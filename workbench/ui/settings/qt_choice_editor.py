"""A choice setting: a combo box of the declared choices."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QHBoxLayout, QWidget

from workbench.config import Setting
from workbench.ui.settings.qt_focus_wheel import QtFocusComboBox


class QtChoiceEditor(QWidget):
    changed = Signal(object)

    def __init__(self, setting: Setting, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setting = setting
        self.combo = QtFocusComboBox()
        self.combo.addItems(list(setting.choices))
        self.combo.currentTextChanged.connect(self.changed.emit)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.combo)
        layout.addStretch(1)

    def set_value(self, value: Any) -> None:
        with QSignalBlocker(self.combo):
            index = self.combo.findText(str(value))
            # An undeclared value (an old preset) stays pending; validate() says what is wrong.
            self.combo.setCurrentIndex(index)

    def value(self) -> str:
        return self.combo.currentText()
