"""A QLabel for text the program did not write: file names, model metadata, error messages.

QLabel's default text format guesses: a string that looks like HTML is rendered as HTML, so a
model path or a GGUF name with `<b>` in it, or an error quoting the model's output, would be
interpreted rather than shown. A plain label always shows the characters it was given.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget


def plain_label(text: str = "", parent: QWidget | None = None) -> QLabel:
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    return label
