"""A conversation settings dialog's "Load … file" button: the file is chosen without a nested
event loop, read off the UI thread by its reader, and what the reader makes of it is emitted
(`loaded`). A file the reader refuses (ValueError) says why under the button, and nothing is
emitted: the pending settings are left as they were. The answer schema (qt_schema_file.py) and
the tools file (tools_file.py) each give it their reader."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QPushButton, QWidget

from workbench.ui.qt_plain_label import plain_label
from workbench.ui.qt_text_style import tone_text


class QtFileButton(QWidget):
    loaded = Signal(object)  # what the reader returned

    def __init__(self, text: str, tip: str, title: str, name_filter: str,
                 read: Callable[[str], Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title, self.name_filter, self.read = title, name_filter, read
        self.button = QPushButton(text)
        self.button.setToolTip(tip)
        self.button.clicked.connect(self._pick)
        self.error = plain_label()  # a file name is untrusted text: never rich text
        self.error.setWordWrap(True)
        tone_text(self.error, "error")
        self.error.hide()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.button)
        row.addWidget(self.error, 1)
        self._dialog: QFileDialog | None = None
        self.task: asyncio.Task[None] | None = None

    def _pick(self) -> None:
        dialog = QFileDialog(self, self.title)
        dialog.setNameFilter(self.name_filter)
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.load)
        self._dialog = dialog
        dialog.open()  # no nested event loop

    def load(self, path: str) -> asyncio.Task[None]:
        self.task = asyncio.get_running_loop().create_task(self._load(path))
        return self.task

    async def _load(self, path: str) -> None:
        try:
            value = await asyncio.get_running_loop().run_in_executor(None, self.read, path)
        except ValueError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return
        self.error.hide()
        self.loaded.emit(value)
