"""A one-line plain-text label that shortens its text with "…" when it has too little room.

A QLabel asks for its whole text as its minimum width. In the status bar that text is a model's
file name ("loading <name>…", "reopening the model (<name>) with the new settings…"), so a long
name pushed the main window past the screen's edge while the model loaded. This label asks
for a few characters, shows as much as fits and the whole text in its tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

MIN_CHARS = 12  # the least it asks for: a name's start is enough to recognise it


class QtElidedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)  # names and messages, never markup
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:
        super().setText(text)
        self.setToolTip(text if self.elided else "")

    @property
    def elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), self.fontMetrics().averageCharWidth() * MIN_CHARS),
                     hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.setToolTip(self.text() if self.elided else "")

    def paintEvent(self, event: QPaintEvent) -> None:
        if not self.elided:
            super().paintEvent(event)
            return
        painter = QPainter(self)
        rect = self.contentsRect()
        text = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight,
                                             rect.width())
        painter.drawText(rect, int(self.alignment()), text)
