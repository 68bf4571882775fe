"""Read-only chat text that is as tall as its content: Markdown prose or plain reasoning.

A word-wrapped QLabel lays its whole text out three or four times per change (ideal width,
minimum size, height for width, paint), and a streaming answer changes it every render. This
view keeps one QTextDocument at the widget's width, so a change costs one layout; plain text
that only grew is appended, which re-lays out just the last paragraph. Measured on a
2,000-character answer: about 3 ms per update here against about 20 ms for the label.
Selection, copy and links come with QTextBrowser.

What it shows is untrusted: the model writes it, and a user may paste anything. So raw HTML in
the Markdown is shown as the text it is (`<div>` reads "<div>", it does not swallow what
follows), the view never loads a resource (a Markdown image of `file:///...` or `http://...`
stays a placeholder), and a link opens in the system browser only when clicked, and only for
web and mail addresses.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from PySide6.QtCore import QEvent, QSizeF, Qt, QUrl
from PySide6.QtGui import QColor, QDesktopServices, QImage, QTextCursor, QTextDocument
from PySide6.QtWidgets import (
    QFrame,
    QPlainTextEdit,
    QSizePolicy,
    QTextBrowser,
    QTextEdit,
    QWidget,
)

# GitHub-flavoured Markdown (tables, strike-through, task lists) with raw HTML shown as text.
MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value
    | QTextDocument.MarkdownFeature.MarkdownNoHTML.value)
SAFE_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
_PALETTE_EVENTS = frozenset({QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange})


class _NoResourcesDocument(QTextDocument):
    """A document that loads nothing: not a local file, not a remote image, not another page.

    An image gets a grey placeholder square. Returning nothing would not do: Qt's image handler
    then reads the image's file itself, whatever loadResource said."""

    def loadResource(self, kind: int, name: QUrl) -> Any:
        if kind == QTextDocument.ResourceType.ImageResource.value:
            return image_placeholder()
        return None


@cache
def image_placeholder() -> QImage:
    image = QImage(16, 16, QImage.Format.Format_ARGB32)
    image.fill(QColor(128, 128, 128, 96))
    return image


class QtTextView(QTextBrowser):
    def __init__(self, rich: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDocument(_NoResourcesDocument(self))
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
            self.document().setMarkdown(text, MARKDOWN_FEATURES)
        else:
            set_growing_text(self, old, text)

    def changeEvent(self, event: QEvent) -> None:
        # Qt's Markdown reader paints each link in the palette's link colour as it reads it, so
        # a theme switch left dark blue links on the dark window: read the text again.
        super().changeEvent(event)
        if self._rich and self._text and event.type() in _PALETTE_EVENTS:
            self.document().setMarkdown(self._text, MARKDOWN_FEATURES)

    def loadResource(self, kind: int, name: QUrl) -> Any:
        """Nothing is ever loaded: not a local file, not a remote image, not another page."""
        return None

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


def is_safe_link(url: QUrl) -> bool:
    """Web and mail addresses only: never `file:`, `javascript:` or an app's own scheme."""
    return url.isValid() and url.scheme().lower() in SAFE_LINK_SCHEMES


def _open_external(url: QUrl) -> None:
    if is_safe_link(url):
        QDesktopServices.openUrl(url)
