"""The conversation on screen: a scrolling column of message widgets that follows the tail.

Following: while the view is scrolled to the bottom, growth keeps it there. Scrolling up stops
following and shows "Jump to latest"; scrolling back to the bottom (or the button) resumes it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from workbench.embedded import SUGGESTED_QUESTION
from workbench.ui.chat.qt_message_widget import QtMessageWidget
from workbench.ui.chat.shown import ShownMessage
from workbench.ui.qt_text_style import dim_text

_BOTTOM_SLACK = 8  # px: "at the bottom" despite rounding


class QtChatView(QWidget):
    regenerate_requested = Signal(int)
    continue_requested = Signal(int)
    edit_submitted = Signal(int, str)
    edit_closed = Signal()  # an inline editor closed while it had the keyboard focus
    version_requested = Signal(int)
    token_clicked = Signal(int)
    token_hovered = Signal(int)
    tokens_shown = Signal(object)  # a QtMessageWidget that was given its tokens (set_tokens)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        # Messages wrap to the column's width; a horizontal bar appears only if something
        # cannot (a column narrower than a message's widest control), so it stays reachable.
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self._column = QWidget()
        self._layout = QVBoxLayout(self._column)
        self._layout.setContentsMargins(12, 12, 12, 12)
        self._layout.setSpacing(10)
        self.placeholder = QLabel(f"Type a message below to start, e.g. “{SUGGESTED_QUESTION}”\n"
                                  "Enter sends, Shift+Enter adds a line, Esc stops an answer.")
        dim_text(self.placeholder)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._layout.addWidget(self.placeholder)
        self._layout.addStretch(1)
        self.scroll.setWidget(self._column)
        self.jump_button = QPushButton("Jump to latest ↓", self)
        self.jump_button.setVisible(False)
        self.jump_button.clicked.connect(self.follow_tail)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scroll)
        self._widgets: list[QtMessageWidget] = []
        self.following = True
        self._programmatic = False
        bar = self.scroll.verticalScrollBar()
        bar.rangeChanged.connect(self._range_changed)
        bar.valueChanged.connect(self._value_changed)

    # ---- messages -----------------------------------------------------------------------------

    @property
    def messages(self) -> list[QtMessageWidget]:
        return list(self._widgets)

    def widget_for(self, message_id: int) -> QtMessageWidget | None:
        return next((w for w in self._widgets if w.shown.id == message_id), None)

    def show_messages(self, messages: list[ShownMessage]) -> None:
        """Replace the column (a conversation or a branch was opened)."""
        self.clear()
        for shown in messages:
            self.append(shown)
        self.follow_tail()

    def append(self, shown: ShownMessage) -> QtMessageWidget:
        widget = QtMessageWidget(shown)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.continue_requested.connect(self.continue_requested)
        widget.edit_submitted.connect(self.edit_submitted)
        widget.edit_closed.connect(self.edit_closed)
        widget.version_requested.connect(self.version_requested)
        widget.token_clicked.connect(self.token_clicked)
        widget.token_hovered.connect(self.token_hovered)
        widget.tokens_set.connect(lambda w=widget: self.tokens_shown.emit(w))
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self._widgets.append(widget)
        self.placeholder.setVisible(False)
        return widget

    def clear(self) -> None:
        for widget in self._widgets:
            self._layout.removeWidget(widget)
            widget.deleteLater()
        self._widgets.clear()
        self.placeholder.setVisible(True)

    def transcript(self) -> str:
        """The branch on screen as Markdown (copy chat)."""
        parts = []
        for w in self._widgets:
            name = {"user": "You", "assistant": "Assistant"}.get(w.shown.role, w.shown.role)
            parts.append(f"**{name}:**\n\n{w.shown.content}")
        return "\n\n".join(parts)

    def mark_span(self, first_x: int, last_x: int) -> None:
        """Highlight the tokens of a span selected on the plots (-1, -1: clear) and bring the
        first answer holding them into view."""
        holders = [w for w in self._widgets if w.mark_tokens(first_x, last_x)]
        if holders:
            # Scrolling away from the tail stops following it (_value_changed).
            self.scroll.ensureWidgetVisible(holders[0])

    def set_actions_enabled(self, enabled: bool) -> None:
        for w in self._widgets:
            w.set_actions_enabled(enabled)

    # ---- following the tail -------------------------------------------------------------------

    def follow_tail(self) -> None:
        self.following = True
        self.jump_button.setVisible(False)
        bar = self.scroll.verticalScrollBar()
        self._programmatic = True
        bar.setValue(bar.maximum())
        self._programmatic = False

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self.following:
            self._programmatic = True
            self.scroll.verticalScrollBar().setValue(maximum)
            self._programmatic = False

    def _value_changed(self, value: int) -> None:
        if self._programmatic:
            return
        at_bottom = value >= self.scroll.verticalScrollBar().maximum() - _BOTTOM_SLACK
        self.following = at_bottom
        self.jump_button.setVisible(not at_bottom)
        self._place_jump_button()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._place_jump_button()

    def _place_jump_button(self) -> None:
        hint = self.jump_button.sizeHint()
        self.jump_button.resize(hint)
        self.jump_button.move(self.width() - hint.width() - 24, self.height() - hint.height() - 12)
        self.jump_button.raise_()
