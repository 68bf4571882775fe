"""One message: header with version arrows and actions, reasoning block, Markdown body,
status note, stats line; for the user's messages an inline editor (edit and resend).

Streaming text arrives through `stream_text` as often as tokens come, but is only rendered by a
~10 Hz timer, so a fast model never turns into Markdown re-layouts per token.

A message fits a narrow chat column: the header is a flow (its buttons wrap onto a second line
rather than be clipped to "Cop" and "Reg") and the stats line word-wraps.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.store import format_stats_line
from workbench.ui.chat.context import status_note
from workbench.ui.chat.qt_composer import QtPromptEdit
from workbench.ui.chat.qt_markdown_view import QtMarkdownView
from workbench.ui.chat.qt_reasoning_block import QtReasoningBlock
from workbench.ui.chat.qt_thumbnails import QtThumbnailStrip
from workbench.ui.chat.shown import ShownMessage
from workbench.ui.chat.stats_line import thought_label
from workbench.ui.qt_flow_layout import QtFlowLayout
from workbench.ui.qt_plain_label import plain_label
from workbench.ui.qt_text_style import SMALL_PX, dim_text, tone_text
from workbench.ui.ui_pacer import shared_pacer

RENDER_MS = 100  # streaming text is laid out at most 10 times a second...
MAX_RENDER_S = 0.75  # ...and at least every 0.75 s, however busy the cores (ui_pacer.py)
_USER_TINT = QColor("#eef3fb")
_USER_TINT_DARK = QColor("#2b3442")  # the same blue-grey, for a dark palette
_ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
_BADGES = {"stopped": "stopped", "interrupted": "interrupted", "error": "failed",
           "rejected": "not sent", "streaming": ""}


class QtMessageWidget(QFrame):
    regenerate_requested = Signal(int)  # message id of the answer to regenerate
    continue_requested = Signal(int)  # message id of the answer to generate on from its end
    edit_submitted = Signal(int, str)  # message id of the user message, the new text
    edit_closed = Signal()  # the inline editor closed while it had the keyboard focus
    version_requested = Signal(int)  # message id of the sibling to show
    token_clicked = Signal(int)  # token index across the conversation (x on the plots)
    token_hovered = Signal(int)  # ...under the pointer in the token view (the plots' readout)
    tokens_set = Signal()  # set_tokens gave it its tokens (the stall explainer listens)

    def __init__(self, shown: ShownMessage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(f"message_{shown.role}")
        self.shown = shown
        self._pending: tuple[str, str, int] | None = None
        self._token_pieces: list[str] = []
        self._token_x0 = -1
        self._marked: tuple[int, int] | None = None  # token indices of a span on the plots
        self.tool_blocks: list[QWidget] = []  # the answer's tool calls (add_tool_block)
        self._build()
        self._render_timer = QTimer(self)
        self._render_timer.setInterval(RENDER_MS)
        self._render_timer.timeout.connect(self._render_pending)
        self.update_from(shown)

    # ---- construction -------------------------------------------------------------------------

    def _build(self) -> None:
        role = self.shown.role
        self.role_label = QLabel(f"<b>{_ROLE_NAMES.get(role, role)}</b>")
        self.prev_button = _tool("‹", "Previous version")
        self.next_button = _tool("›", "Next version")
        self.version_label = QLabel()
        self.prev_button.clicked.connect(lambda: self._go(self.shown.previous_id))
        self.next_button.clicked.connect(lambda: self._go(self.shown.next_id))
        self.badge = QLabel()
        tone_text(self.badge, "warning", bold=True)
        self.copy_button = _tool("Copy", "Copy this message")
        self.copy_button.clicked.connect(self.copy)
        self.edit_button = _tool("Edit", "Edit and resend (the original stays as a version)")
        self.edit_button.clicked.connect(self.start_edit)
        self.regenerate_button = _tool("Regenerate", "Generate another version of this answer")
        self.regenerate_button.clicked.connect(
            lambda: self.regenerate_requested.emit(self.shown.id))
        self.continue_button = _tool("Continue", "Generate on from where this answer stopped, "
                                                 "appending to it")
        self.continue_button.clicked.connect(lambda: self.continue_requested.emit(self.shown.id))
        self.tokens_button = _tool("Tokens", "Show the answer token by token; click a token to "
                                             "find it on the plots")
        self.tokens_button.setCheckable(True)
        self.tokens_button.toggled.connect(self._show_tokens)
        header = QtFlowLayout()
        for w in (self.role_label, self.prev_button, self.version_label, self.next_button,
                  self.badge):
            header.addWidget(w)
        header.add_stretch()
        for w in (self.tokens_button, self.copy_button, self.edit_button, self.continue_button,
                  self.regenerate_button):
            header.addWidget(w)
        self.edit_button.setVisible(role == "user")
        self.regenerate_button.setVisible(role == "assistant")
        self.tokens_button.setVisible(False)

        self.reasoning = QtReasoningBlock()
        self.body = QtMarkdownView()
        # The token view and the editor are made when first asked for: most messages never
        # show them, and every widget made adds to the moment a new message appears.
        self.token_view: QLabel | None = None
        self.editor: QPlainTextEdit | None = None
        self.save_button: QPushButton | None = None
        self._edit_row: QWidget | None = None
        self.note = plain_label()
        self.note.setWordWrap(True)
        tone_text(self.note, "warning", italic=True)
        self.error = plain_label()
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        tone_text(self.error, "error")
        self.stats = plain_label()
        self.stats.setWordWrap(True)
        dim_text(self.stats, pixel_size=SMALL_PX)
        self.stats.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(10, 6, 10, 6)
        self._layout.setSpacing(4)
        self._layout.addLayout(header)
        # The images the message carried (a message's images never change: made once).
        self.thumbnails = QtThumbnailStrip()
        self.thumbnails.set_images([(i.data, i.name) for i in self.shown.images])
        self._layout.addWidget(self.thumbnails)
        for w in (self.reasoning, self.body, self.note, self.error, self.stats):
            self._layout.addWidget(w)

    def _ensure_token_view(self) -> QLabel:
        if self.token_view is None:
            self.token_view = QLabel()
            self.token_view.setWordWrap(True)
            self.token_view.setTextFormat(Qt.TextFormat.RichText)
            self.token_view.linkActivated.connect(self._token_link)
            self.token_view.linkHovered.connect(self._token_hover)
            self._layout.insertWidget(self._layout.indexOf(self.body) + 1, self.token_view)
        return self.token_view

    def _ensure_editor(self) -> QPlainTextEdit:
        if self.editor is None:
            # The composer's own box: Enter sends, Shift+Enter starts a new line, Esc cancels.
            self.editor = QtPromptEdit()
            self.editor.setToolTip("Enter sends, Shift+Enter: new line, Esc cancels")
            self.editor.submitted.connect(self._submit_edit)
            self.editor.escape.connect(self.cancel_edit)
            self.save_button = QPushButton("Save and send")
            self.save_button.setToolTip("Save and send (Enter)")
            cancel = QPushButton("Cancel")
            self.save_button.clicked.connect(self._submit_edit)
            cancel.clicked.connect(self.cancel_edit)
            self._edit_row = QWidget()
            edit_row = QHBoxLayout(self._edit_row)
            edit_row.addStretch(1)
            edit_row.addWidget(cancel)
            edit_row.addWidget(self.save_button)
            at = self._layout.indexOf(self.body) + 1
            self._layout.insertWidget(at, self.editor)
            self._layout.insertWidget(at + 1, self._edit_row)
        return self.editor

    def paintEvent(self, event: QPaintEvent) -> None:
        # The user's messages sit on a tint, drawn here rather than by a style sheet (which
        # would slow every child's polish and paint).
        if self.shown.role == "user":
            painter = QPainter(self)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(Qt.PenStyle.NoPen)
            dark = self.palette().color(QPalette.ColorRole.Window).lightness() < 128
            painter.setBrush(_USER_TINT_DARK if dark else _USER_TINT)
            painter.drawRoundedRect(self.rect(), 6, 6)
        super().paintEvent(event)

    # ---- state --------------------------------------------------------------------------------

    def update_from(self, shown: ShownMessage) -> None:
        """Show a stored message (or the final state of a streamed one)."""
        self.shown = shown
        self._render_timer.stop()
        self._pending = None
        self.body.set_markdown(shown.content)
        self.reasoning.set_text(shown.reasoning, shown.stats.n_think or 0)
        self.reasoning.finish(thought_label(shown.stats, live=False))
        many = shown.versions > 1
        for w in (self.prev_button, self.version_label, self.next_button):
            w.setVisible(many)
        self.version_label.setText(f"{shown.version}/{shown.versions}")
        self.prev_button.setEnabled(shown.previous_id is not None)
        self.next_button.setEnabled(shown.next_id is not None)
        self.badge.setText(_BADGES.get(shown.status, ""))
        note = status_note(shown.status)
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self.error.setText(shown.error)
        self.error.setVisible(bool(shown.error))
        line = format_stats_line(shown.stats) if shown.role == "assistant" else ""
        self.stats.setText(line)
        self.stats.setVisible(bool(line))
        self.regenerate_button.setEnabled(shown.status != "streaming")
        self.continue_button.setVisible(can_continue(shown))

    def begin_stream(self) -> None:
        self.shown.status = "streaming"
        self.regenerate_button.setEnabled(False)
        self.continue_button.setVisible(False)
        self.badge.setText("")
        self._render_timer.start()

    def stream_text(self, answer: str, reasoning: str, n_think: int) -> None:
        """The text so far; cheap, called per token. Rendering happens on the timer."""
        self._pending = (answer, reasoning, n_think)

    def set_status_text(self, text: str) -> None:
        """A transient line under a streaming answer ("reading the prompt 120 of 300")."""
        self.stats.setText(text)
        self.stats.setVisible(bool(text))

    def _render_pending(self) -> None:
        pacer = shared_pacer()
        # Tick no faster than renders are allowed: an idle tick still costs a wake-up.
        interval = int(pacer.interval(RENDER_MS / 1000, MAX_RENDER_S) * 1000)
        if interval != self._render_timer.interval():
            self._render_timer.setInterval(interval)
        if self._pending is None or not pacer.due("text", RENDER_MS / 1000, MAX_RENDER_S):
            return
        self._render(*self._pending)
        self._pending = None

    def _render(self, answer: str, reasoning: str, n_think: int) -> None:
        if reasoning and not answer and not self.reasoning.live:
            self.reasoning.start_live()
        self.reasoning.set_text(reasoning, n_think)
        if answer and self.reasoning.live:
            self.reasoning.finish("Thought")  # folded now; the exact time comes with the stats
        self.body.set_markdown(answer)

    def flush(self) -> None:
        """Render pending text now (tests and the final update use it)."""
        if self._pending is not None:
            self._render(*self._pending)
            self._pending = None

    # ---- tokens -------------------------------------------------------------------------------

    def set_tokens(self, x_start: int, pieces: list[str]) -> None:
        """The generated pieces and the plot index of the first; enables the Tokens view."""
        self._token_x0, self._token_pieces = x_start, list(pieces)
        self.tokens_button.setVisible(bool(pieces))
        if self.tokens_button.isChecked():
            self._show_tokens(True)
        self.tokens_set.emit()

    def add_tool_block(self, block: QWidget) -> None:
        """A tool call the answer made (qt_tool_call_block.py), under its text, in call order."""
        self._layout.insertWidget(self._layout.indexOf(self.body) + 1 + len(self.tool_blocks),
                                  block)
        self.tool_blocks.append(block)

    def add_section(self, widget: QWidget) -> None:
        """A widget of another module's under the message, after its stats (the stall list)."""
        self._layout.addWidget(widget)

    @property
    def token_x0(self) -> int:
        """The plot x of the first generated token shown (-1: none)."""
        return self._token_x0 if self._token_pieces else -1

    @property
    def token_pieces(self) -> list[str]:
        return list(self._token_pieces)

    def mark_tokens(self, first_x: int, last_x: int) -> bool:
        """Highlight the tokens with plot x in first_x..last_x (a span selected on the plots),
        opening the token view; False, and any earlier mark cleared, if none is here."""
        n = len(self._token_pieces)
        first, last = max(0, first_x - self._token_x0), min(n - 1, last_x - self._token_x0)
        marked = (first, last) if self._token_x0 >= 0 and first_x >= 0 and first <= last else None
        if marked == self._marked:
            return marked is not None
        self._marked = marked
        if marked is not None and not self.tokens_button.isChecked():
            self.tokens_button.setChecked(True)  # renders through _show_tokens
        elif self.tokens_button.isChecked():
            self._show_tokens(True)
        return marked is not None

    def _show_tokens(self, on: bool) -> None:
        if not on and self.token_view is None:
            return
        token_view = self._ensure_token_view()
        if on:
            spans = []
            lo, hi = self._marked or (-1, -1)
            for i, piece in enumerate(self._token_pieces):
                shade = "#ffd54f" if lo <= i <= hi else "#f3f0e0" if i % 2 else "#e4eef8"
                text = html.escape(piece).replace("\n", "↵<br>") or "∅"
                spans.append(f'<a href="tok:{i}" style="color: #222; text-decoration: none; '
                             f'background: {shade};">{text}</a>')
            # A zero-width space between tokens lets a line break there: text without spaces
            # (code, noise from a synthetic model) would otherwise be one word as wide as the
            # answer, and the chat column would need to scroll sideways.
            token_view.setText("\u200b".join(spans))
        token_view.setVisible(on)
        self.body.setVisible(not on)

    def _token_link(self, link: str) -> None:
        if link.startswith("tok:") and self._token_x0 >= 0:
            self.token_clicked.emit(self._token_x0 + int(link[4:]))

    def _token_hover(self, link: str) -> None:
        """The pointer on a token (link "" when it leaves): the plots' readout reads it."""
        if link.startswith("tok:") and self._token_x0 >= 0:
            self.token_hovered.emit(self._token_x0 + int(link[4:]))

    # ---- actions ------------------------------------------------------------------------------

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.shown.content)

    def start_edit(self) -> None:
        editor = self._ensure_editor()
        editor.setPlainText(self.shown.content)
        editor.setVisible(True)
        self._edit_row.setVisible(True)
        self.body.setVisible(False)
        editor.setFocus()

    def cancel_edit(self) -> None:
        if self.editor is None:
            return
        had_focus = self.editor.hasFocus()
        self.editor.setVisible(False)
        self._edit_row.setVisible(False)
        self.body.setVisible(True)
        if had_focus:  # not lost in a hidden widget: back to the window's message box
            self.edit_closed.emit()

    def _submit_edit(self) -> None:
        if self.editor is None:
            return
        text = self.editor.toPlainText().strip()
        self.cancel_edit()
        if text:
            self.edit_submitted.emit(self.shown.id, text)

    def _go(self, message_id: int | None) -> None:
        if message_id is not None:
            self.version_requested.emit(message_id)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Disabled while another answer streams (one generation at a time)."""
        for w in (self.edit_button, self.regenerate_button, self.continue_button,
                  self.prev_button, self.next_button):
            has_target = not ((w is self.prev_button and self.shown.previous_id is None)
                              or (w is self.next_button and self.shown.next_id is None))
            w.setEnabled(enabled and has_target)


def can_continue(shown: ShownMessage) -> bool:
    """An answer cut short by the token limit or by Stop can go on, in its reasoning block when
    it was cut there (no answer text yet), else in its answer text."""
    return (shown.role == "assistant" and bool(shown.content or shown.reasoning)
            and (shown.status == "stopped" or shown.stats.stop_reason == "length"))


def _tool(text: str, tip: str) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tip)
    button.setAutoRaise(True)
    return button
