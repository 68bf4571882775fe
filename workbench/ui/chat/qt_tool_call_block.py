"""A tool call in the chat, as its own collapsible block: the tool's name, the call's arguments
pretty-printed, then its result.

The result comes from the user (pasted into the block, then "Send result") or from the tool's
local command (ui/chat/tools_file.py), which runs only after the user confirms a dialog that
shows the exact command line; declining runs nothing. The command runs in a QProcess (never on
the UI thread), without a shell, under a time limit; its output (untrusted: shown as plain text,
and cut at tools_file.MAX_RESULT_CHARS) becomes the result. `result_ready(call id, text)` hands
it on, once: it is the `role: tool` message the model continues from.

The block is made only from a parsed `ToolCall` (engine/tools: the name of a declared tool and
the JSON text of an object): a malformed call stays text in the answer and never gets a block.
"""

from __future__ import annotations

import shlex

from PySide6.QtCore import QProcess, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.tools.calls import ToolCall
from workbench.ui.chat.qt_folding_block import QtFoldingBlock
from workbench.ui.chat.qt_text_view import QtTextView
from workbench.ui.chat.tools_file import command_line, pretty_arguments, result_text
from workbench.ui.qt_plain_label import plain_label

COMMAND_TIMEOUT_MS = 30_000


class QtToolCallBlock(QtFoldingBlock):
    result_ready = Signal(str, str)  # the call's id, the result text

    def __init__(self, call: ToolCall, command: tuple[str, ...] | None = None,
                 parent: QWidget | None = None, timeout_ms: int = COMMAND_TIMEOUT_MS) -> None:
        super().__init__(parent)
        self.setObjectName("toolCallBlock")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.call, self.command, self.timeout_ms = call, command, timeout_ms
        self.argv = command_line(command, call.arguments) if command else []
        self.body = QWidget()
        self.arguments = QtTextView(rich=False)  # the model wrote them: plain text only
        self.arguments.set_text(pretty_arguments(call.arguments))
        self.result = QPlainTextEdit()
        self.result.setPlaceholderText("Paste the tool's result here, then Send result")
        self.result.setTabChangesFocus(True)
        self.status = plain_label()
        self.status.setWordWrap(True)
        self.send_button = QPushButton("Send result")
        self.send_button.clicked.connect(self.send_result)
        self.run_button = QPushButton("Run command…")
        self.run_button.setVisible(bool(command))
        self.run_button.setToolTip(shlex.join(self.argv) if command else "")
        self.run_button.clicked.connect(self.ask_to_run)
        buttons = QHBoxLayout()
        buttons.addWidget(self.status, 1)
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.send_button)
        inner = QVBoxLayout(self.body)
        inner.setContentsMargins(0, 0, 0, 0)
        inner.addWidget(plain_label("Arguments"))
        inner.addWidget(self.arguments)
        inner.addWidget(plain_label("Result"))
        inner.addWidget(self.result)
        inner.addLayout(buttons)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 4)
        layout.setSpacing(2)
        layout.addWidget(self.toggle)
        layout.addWidget(self.body)
        self.confirm: QMessageBox | None = None
        self.process: QProcess | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._timed_out)
        self._timed_out_flag = False
        self.done = False
        self._show_header()
        self.set_expanded(True)

    def _show_header(self) -> None:
        state = "answered" if self.done else "waiting for its result"
        self.toggle.setText(f"Tool call: {self.call.name} · {state}")

    # ---- the result ---------------------------------------------------------------------------

    def send_result(self) -> None:
        """The result in the block (pasted, or the command's) goes to the model, once."""
        if self.done or (self.process is not None and self.process.state()
                         != QProcess.ProcessState.NotRunning):
            return
        self.done = True
        self.result.setReadOnly(True)
        self.send_button.setEnabled(False)
        self.run_button.setEnabled(False)
        self._show_header()
        self.set_expanded(False)
        self.result_ready.emit(self.call.id, self.result.toPlainText())

    def show_answered(self, text: str) -> None:
        """The call's result as the conversation keeps it (a reopened conversation): shown,
        folded, and never sent again."""
        self.result.setPlainText(text)
        self.done = True
        self.result.setReadOnly(True)
        self.send_button.setEnabled(False)
        self.run_button.setEnabled(False)
        self._show_header()
        self.set_expanded(False)

    def set_waiting(self, live: bool) -> None:
        """Whether a result may be given now: only for the calls the conversation's last
        answer made (an older one's calls the conversation went on without stay unanswered)."""
        if self.done:
            return
        self.result.setReadOnly(not live)
        self.send_button.setEnabled(live)
        self.run_button.setEnabled(live)
        if not live:
            self.toggle.setText(f"Tool call: {self.call.name} · not answered")

    def ask_to_run(self) -> QMessageBox:
        """The confirmation, without a nested event loop: the command runs only on Yes."""
        box = QMessageBox(QMessageBox.Icon.Question, "Run the tool's command?",
                          f"The model called {self.call.name}. Run this command on your "
                          "computer?", QMessageBox.StandardButton.Yes
                          | QMessageBox.StandardButton.No, self)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setInformativeText(shlex.join(self.argv))  # the exact command line, arguments last
        box.setDefaultButton(QMessageBox.StandardButton.No)
        box.finished.connect(lambda code: self._confirmed(box.clickedButton() is box.button(
            QMessageBox.StandardButton.Yes)))
        self.confirm = box
        box.open()
        return box

    def _confirmed(self, yes: bool) -> None:
        self.confirm = None
        if yes and not self.done:
            self.run()

    def run(self) -> None:
        """Start the command (asked for and confirmed); its output becomes the result."""
        process = QProcess(self)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        process.finished.connect(self._finished)
        process.errorOccurred.connect(self._failed)
        self.process = process
        self._timed_out_flag = False
        self.run_button.setEnabled(False)
        self.send_button.setEnabled(False)
        self.status.setText("Running…")
        process.start(self.argv[0], self.argv[1:])
        self._timer.start(self.timeout_ms)

    def _timed_out(self) -> None:
        if self.process is not None and self.process.state() != QProcess.ProcessState.NotRunning:
            self._timed_out_flag = True
            self.process.kill()

    def _failed(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._timer.stop()
            self._ended(f"The command could not start: {self.process.errorString()}"
                        if self.process else "The command could not start")

    def _finished(self, code: int, status: QProcess.ExitStatus) -> None:
        self._timer.stop()
        assert self.process is not None
        output = result_text(bytes(self.process.readAll().data()))
        if self._timed_out_flag:
            note = f"The command did not finish within {self.timeout_ms / 1000:g} s and was " \
                   "stopped."
        elif status != QProcess.ExitStatus.NormalExit:
            note = "The command crashed."
        else:
            note = f"The command exited with code {code}." if code else ""
        self.result.setPlainText(output)
        self._ended(note)

    def _ended(self, note: str) -> None:
        self.status.setText(note or "Done: check the result, then Send result.")
        self.run_button.setEnabled(True)
        self.send_button.setEnabled(True)
