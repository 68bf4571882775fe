"""A bar above the composer for what the user must see now: errors, and undo offers.

Errors that belong to one answer are shown on that answer; this bar is for the rest (a model
that will not load, a database problem, a cancelled load). Every message says what to do, and
may offer it as buttons (`action`, then `more`). A bar that must stay while its condition
lasts (the window runs on a temporary store) is shown with closable=False.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QToolButton, QWidget

from workbench.ui.qt_plain_label import plain_label
from workbench.ui.qt_theme import tones


def bar_style(kind: str) -> str:
    """The bar's fill for `kind` ("error" or "info") on the theme in force: a light fill under
    the dark theme's light text would leave the text unreadable."""
    t = tones()
    fill, edge = (t.error_fill, t.error_edge) if kind == "error" else (t.info_fill, t.info_edge)
    return f"QFrame#noticeBar {{ background: {fill}; border: 1px solid {edge}; }}"


class QtNoticeBar(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("noticeBar")
        self.label = plain_label()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.action = QPushButton()
        self.action.setVisible(False)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.action)
        layout.addWidget(self.close_button)
        self.kind = ""
        self._callback: Callable[[], None] | None = None
        self._more: list[QPushButton] = []
        self._more_callbacks: list[Callable[[], None]] = []
        self.action.clicked.connect(self._act)
        self.setVisible(False)

    @property
    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""

    def show_error(self, text: str, action: str = "",
                   callback: Callable[[], None] | None = None, *,
                   more: Sequence[tuple[str, Callable[[], None]]] = (),
                   closable: bool = True) -> None:
        self._show("error", text, action, callback, more, closable)

    def show_info(self, text: str, action: str = "",
                  callback: Callable[[], None] | None = None, *,
                  more: Sequence[tuple[str, Callable[[], None]]] = (),
                  closable: bool = True) -> None:
        self._show("info", text, action, callback, more, closable)

    @property
    def buttons(self) -> list[QPushButton]:
        """The action buttons shown, in order."""
        return [b for b in (self.action, *self._more) if not b.isHidden()]

    def _show(self, kind: str, text: str, action: str, callback: Callable[[], None] | None,
              more: Sequence[tuple[str, Callable[[], None]]], closable: bool) -> None:
        self.kind = kind
        self._restyle()
        self.label.setText(text)
        self.action.setText(action)
        self.action.setVisible(bool(action))
        self._callback = callback
        while len(self._more) < len(more):
            button = QPushButton()
            index = len(self._more)
            button.clicked.connect(lambda _=False, i=index: self._act_more(i))
            self.layout().insertWidget(self.layout().indexOf(self.close_button), button)
            self._more.append(button)
        for i, button in enumerate(self._more):
            button.setVisible(i < len(more))
            if i < len(more):
                button.setText(more[i][0])
        self._more_callbacks = [cb for _, cb in more]
        self.close_button.setVisible(closable)
        self.setVisible(True)

    def changeEvent(self, event: QEvent) -> None:
        # View > Theme changes every widget's palette: take the new theme's fill. The style
        # sheet changes the palette too, so _restyle sets it only when it differs (no loop).
        if event.type() == QEvent.Type.PaletteChange:
            self._restyle()
        super().changeEvent(event)

    def _restyle(self) -> None:
        style = bar_style(self.kind) if self.kind else ""
        if style != self.styleSheet():
            self.setStyleSheet(style)

    def dismiss(self) -> None:
        self.setVisible(False)
        self.kind = ""
        self._callback = None
        self._more_callbacks = []

    def _act(self) -> None:
        callback = self._callback
        self.dismiss()
        if callback is not None:
            callback()

    def _act_more(self, index: int) -> None:
        callbacks = self._more_callbacks
        self.dismiss()
        if index < len(callbacks):
            callbacks[index]()
