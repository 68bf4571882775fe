"""The conversation settings dialog's "Load answer schema…": a JSON schema from a file, read off
the UI thread, becomes the pending answer schema (and the schema format). A file that cannot be
read says why under the button; the pending settings are left as they were."""

from __future__ import annotations

import asyncio
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QPushButton, QWidget

from workbench.file_kind import TextFileError, read_utf8_text
from workbench.ui.qt_plain_label import plain_label
from workbench.ui.qt_text_style import tone_text

MAX_SCHEMA_BYTES = 1 << 20  # a schema is text a person wrote; more is another file


def read_schema_file(path: str) -> str:
    """The schema file's text; ValueError says what is wrong with the file (not the schema:
    the settings panel checks that, under the schema's row)."""
    subject = f"the schema file {Path(path).name}"
    try:
        if Path(path).is_file() and Path(path).stat().st_size > MAX_SCHEMA_BYTES:
            raise ValueError(f"{subject} is larger than {MAX_SCHEMA_BYTES >> 20} MiB; "
                             "choose a JSON schema file")
        return read_utf8_text(path)
    except TextFileError as exc:
        raise ValueError(exc.sentence(subject) + "; choose a JSON schema file") from None
    except OSError as exc:
        raise ValueError(f"cannot read {subject}: {exc.strerror or exc}") from None


class QtSchemaFileButton(QWidget):
    loaded = Signal(str)  # the schema file's text

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.button = QPushButton("Load answer schema…")
        self.button.setToolTip("Read a JSON schema file into the answer schema (the answer "
                               "format becomes schema)")
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
        dialog = QFileDialog(self, "Choose a JSON schema file")
        dialog.setNameFilter("JSON schemas (*.json);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.load)
        self._dialog = dialog
        dialog.open()  # no nested event loop

    def load(self, path: str) -> asyncio.Task[None]:
        self.task = asyncio.get_running_loop().create_task(self._load(path))
        return self.task

    async def _load(self, path: str) -> None:
        try:
            text = await asyncio.get_running_loop().run_in_executor(None, read_schema_file, path)
        except ValueError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return
        self.error.hide()
        self.loaded.emit(text)
