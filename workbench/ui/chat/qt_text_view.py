"""Read-only chat text that is as tall as its content: Markdown prose or plain reasoning.

A word-wrapped QLabel lays its whole text out three or four times per change (ideal width,
minimum size, height for width, paint), and a streaming answer changes it every render. This
view keeps one QTextDocument at the widget's width, so a change costs one layout; plain text
that only grew is appended, which re-lays out just the last paragraph. Measured on a
2,000-character answer: about 3 ms per update here against about 20 ms for the label.
Selection, copy and links come with QTextBrowser.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QSizeF, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QPlainTextEdit,
    QSizePolicy,
    QTextBrowser,
    QTextEdit,
    QWidget,
)


class QtTextView(QTextBrowser):
    def __init__(self, rich: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rich = rich
        self._text = ""
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
            | Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        # Links open in the browser; the view never navigates away from its own text.
        self.setOpenLinks(False)
        self.anchorClicked.connect(_open_external)
        # Transparent, so the message's own background shows through.
        self.viewport().setAutoFillBackground(False)
        self.document().setDocumentMargin(0)
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        self._fit_height(self.document().size())

    def text(self) -> str:
        """The source text as given (Markdown or plain)."""
        return self._text

    def set_text(self, text: str) -> None:
        if text == self._text:
            return
        old, self._text = self._text, text
        if self._rich:
            self.setMarkdown(text)
        else:
            set_growing_text(self, old, text)

    def _fit_height(self, size: QSizeF) -> None:
        height = math.ceil(size.height())
        if height != self.height():
            self.setFixedHeight(height)


def set_growing_text(edit: QTextEdit | QPlainTextEdit, old: str, new: str) -> None:
    """Plain text that streams only grows: append the new part, so only the last paragraph is
    laid out (and coloured) again; anything else replaces the text."""
    if old and new.startswith(old):
        cursor = QTextCursor(edit.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(new[len(old):])
    else:
        edit.setPlainText(new)


def _open_external(url: QUrl) -> None:
    QDesktopServices.openUrl(url)
