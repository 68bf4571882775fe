"""A str setting: a line edit, with a "Browse…" file picker when the value is a path.

The picker is opened without a nested event loop (QFileDialog.open), which keeps the qasync
loop the window runs on free of re-entrancy.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLineEdit, QPushButton, QWidget

from workbench.config import Setting

_FILTERS = {"model": "GGUF models (*.gguf);;All files (*)",
            "chat_template_file": "Jinja templates (*.jinja *.j2 *.txt);;All files (*)"}


class QtTextEditor(QWidget):
    changed = Signal(object)

    def __init__(self, setting: Setting, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setting = setting
        self.line = QLineEdit()
        empty = dict(setting.special).get("")
        if empty:
            self.line.setPlaceholderText(empty)
        self.line.setClearButtonEnabled(True)
        self.line.textChanged.connect(self.changed.emit)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.line, 1)
        self.browse: QPushButton | None = None
        if setting.metavar == "PATH":
            self.browse = QPushButton("Browse…")
            self.browse.clicked.connect(self._pick)
            layout.addWidget(self.browse)
        self._dialog: QFileDialog | None = None

    def _pick(self) -> None:
        dialog = QFileDialog(self, f"Choose the {self.setting.label.lower()}")
        dialog.setNameFilter(_FILTERS.get(self.setting.name, "All files (*)"))
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.line.setText)  # emits changed like a typed edit
        self._dialog = dialog
        dialog.open()

    def set_value(self, value: Any) -> None:
        with QSignalBlocker(self.line):
            self.line.setText(value if isinstance(value, str) else "")

    def value(self) -> str:
        return self.line.text()
