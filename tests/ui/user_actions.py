"""What the window tests do as a user would."""

from __future__ import annotations

from PySide6.QtCore import Qt

WAIT = 120_000  # ms: a real model answers in well under this, even on a loaded machine


def send(qtbot, window, text: str) -> None:
    """Type and press Enter, as a user does; wait until the answer is finished."""
    done = window.chat.turns_done
    window.composer.prompt.setPlainText(text)
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)
