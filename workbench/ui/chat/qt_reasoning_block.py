"""The reasoning block above an answer: live and expanded while the model thinks, then folded.

While live its header runs a timer and a token count ("Thinking… 4 s · 57 tokens"); the timer
is a display clock only. When the answer starts, the header becomes "Thought for 12 s" with the
engine-measured reasoning time, and the block folds; a click unfolds it.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QVBoxLayout, QWidget

from workbench.ui.chat.qt_folding_block import QtFoldingBlock
from workbench.ui.chat.qt_text_view import QtTextView
from workbench.ui.qt_text_style import style_text


class QtReasoningBlock(QtFoldingBlock):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("reasoningBlock")
        self.body = QtTextView(rich=False)
        style_text(self.body, "#666")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 4)
        layout.setSpacing(2)
        layout.addWidget(self.toggle)
        layout.addWidget(self.body)
        self._live = False
        self._started = 0.0
        self._tokens = 0
        self._clock = QTimer(self)
        self._clock.setInterval(500)  # a readable running timer; text painting is not free
        self._clock.timeout.connect(self._tick)
        self.set_expanded(False)
        self.setVisible(False)

    @property
    def live(self) -> bool:
        return self._live

    def start_live(self) -> None:
        """The model started reasoning: show, expand and run the clock."""
        self._live = True
        self._started = time.monotonic()
        self.setVisible(True)
        self.set_expanded(True)
        self._clock.start()
        self._tick()

    def set_text(self, text: str, tokens: int) -> None:
        """Called by the message's render timer (<= 10 Hz), not per token."""
        changed = tokens != self._tokens
        self._tokens = tokens
        if self._live and changed:
            self._tick()
        self.body.set_text(text)
        if text and not self.isVisible():
            self.setVisible(True)

    def finish(self, header: str) -> None:
        """Reasoning is over: fold the block under its final header."""
        was_live = self._live
        self._live = False
        self._clock.stop()
        self.toggle.setText(header)
        self.setVisible(bool(self.body.text()))
        if was_live:
            self.set_expanded(False)

    def _tick(self) -> None:
        seconds = time.monotonic() - self._started
        self.toggle.setText(f"Thinking… {seconds:.0f} s · {self._tokens} tokens")
