"""A label for numbers that change often: its size only ever grows.

A QLabel's size hint follows its text, so a number going from "9.8" to "10.2" changes it, and
the change climbs the layouts: inside a dock or the status bar it re-lays out the whole main
window and repaints every widget in it, several times a second while an answer streams. This
label asks for the widest text it has shown so far, so the layouts settle after a few updates
and a new number repaints only the label itself.
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QLabel, QWidget


class QtStableLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self._widest = 0

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        self._widest = max(self._widest, hint.width())
        return QSize(self._widest, hint.height())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(max(hint.width(), self._widest), hint.height())
