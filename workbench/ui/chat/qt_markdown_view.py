"""Markdown as a column of prose views and code blocks, updated in place while it streams.

`set_markdown` is called by a timer (a few times a second), never per token: Markdown layout is
the expensive part of a chat view. Blocks that did not change keep their widgets, so a long
answer costs one re-layout of its last block per update, not of the whole answer.
"""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget

from workbench.ui.chat.markdown_blocks import Block, split_blocks
from workbench.ui.chat.qt_code_block import QtCodeBlock
from workbench.ui.chat.qt_text_view import QtTextView


class QtMarkdownView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._blocks: list[Block] = []
        self._widgets: list[QWidget] = []
        self._markdown = ""

    @property
    def markdown(self) -> str:
        return self._markdown

    def set_markdown(self, text: str) -> None:
        if text == self._markdown:
            return
        self._markdown = text
        blocks = split_blocks(text)
        for i, block in enumerate(blocks):
            if i < len(self._blocks) and self._blocks[i] == block:
                continue
            if i < len(self._widgets) and _same_kind(self._blocks[i], block):
                _update(self._widgets[i], block)
                continue
            self._truncate(i)
            widget = _make(block)
            self._widgets.append(widget)
            self._layout.addWidget(widget)
        self._truncate(len(blocks))
        self._blocks = blocks

    def code_blocks(self) -> list[QtCodeBlock]:
        return [w for w in self._widgets if isinstance(w, QtCodeBlock)]

    def _truncate(self, n: int) -> None:
        while len(self._widgets) > n:
            widget = self._widgets.pop()
            self._layout.removeWidget(widget)
            widget.deleteLater()
        del self._blocks[n:]


def _same_kind(a: Block, b: Block) -> bool:
    return a.kind == b.kind and a.language == b.language


def _make(block: Block) -> QWidget:
    if block.kind == "code":
        widget = QtCodeBlock(block.language)
        widget.set_code(block.text)
        return widget
    view = QtTextView()
    view.set_text(block.text)
    return view


def _update(widget: QWidget, block: Block) -> None:
    if isinstance(widget, QtCodeBlock):
        widget.set_code(block.text)
    elif isinstance(widget, QtTextView):
        widget.set_text(block.text)
