"""The composer under the chat: the prompt box, Send/Stop, the Thinking switch, the context gauge.

Enter sends and Shift+Enter starts a new line. While an answer streams the button reads "Stop"
and, after a click, "Stopping…" until the engine confirms. The line under the prompt wraps
(a flow, its notes word-wrapped) so that a narrow chat column never widens the window.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.chat.qt_context_gauge import QtContextGauge
from workbench.ui.qt_flow_layout import QtFlowLayout
from workbench.ui.qt_plain_label import plain_label


class QtPromptEdit(QPlainTextEdit):
    submitted = Signal()
    escape = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            return
        super().keyPressEvent(event)


class QtComposer(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.prompt = QtPromptEdit()
        self.prompt.setPlaceholderText("Message the model (Enter sends, Shift+Enter: new line)")
        self.prompt.setMaximumHeight(110)
        self.prompt.submitted.connect(self._submit)
        self.prompt.escape.connect(self.stop_requested)
        self.button = QPushButton("Send")
        self.button.setMinimumWidth(90)
        self.button.clicked.connect(self._clicked)
        self.think = QCheckBox("Thinking")
        self.think_note = plain_label()
        self.think_note.setStyleSheet("color: #888; font-size: 11px;")
        self.think_note.setWordWrap(True)
        self.gauge = QtContextGauge()
        self.hint = plain_label()
        self.hint.setStyleSheet("color: #888; font-size: 11px;")
        self.hint.setWordWrap(True)
        # What the draft would cost to read before its first token, updated as the user types.
        self.forecast = plain_label()
        self.forecast.setStyleSheet("color: #888; font-size: 11px;")
        row = QHBoxLayout()
        row.addWidget(self.prompt, 1)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignBottom)
        under = QtFlowLayout()
        under.addWidget(self.think)
        under.addWidget(self.think_note)
        under.add_stretch()
        under.addWidget(self.forecast)
        under.addWidget(self.hint)
        under.addWidget(self.gauge)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 8)
        layout.addLayout(row)
        layout.addLayout(under)
        self._busy = False
        self._ready = False
        self.set_ready(False)

    @property
    def busy(self) -> bool:
        return self._busy

    def set_ready(self, ready: bool, why: str = "") -> None:
        """Whether a model is loaded; `why` says what to do when not."""
        self._ready = ready
        self.button.setEnabled(ready or self._busy)
        self.hint.setText("" if ready else why)

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.button.setText("Stop" if busy else "Send")
        self.button.setToolTip("Stop the answer (Esc)" if busy else "Send (Enter)")
        self.button.setEnabled(busy or self._ready)

    def set_stopping(self) -> None:
        self.button.setText("Stopping…")
        self.button.setEnabled(False)

    def set_think_control(self, control: str, note: str, default_on: bool) -> None:
        """"none": the template cannot turn thinking off, so the switch reads on, disabled."""
        self.think.setEnabled(control != "none")
        self.think.setChecked(True if control == "none" else default_on)
        self.think_note.setText(note)

    def _clicked(self) -> None:
        if self._busy:
            self.stop_requested.emit()
        else:
            self._submit()

    def _submit(self) -> None:
        if self._busy or not self._ready:
            return
        text = self.prompt.toPlainText().strip()
        if not text:
            return
        # The text stays in the box until it is stored (`clear_sent`): if saving fails, the
        # user still has what they typed.
        self.send_requested.emit(text)

    def clear_sent(self, text: str) -> None:
        """The message `text` is stored: clear the box, unless the user already typed on."""
        if self.prompt.toPlainText().strip() == text:
            self.prompt.clear()
