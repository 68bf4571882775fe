"""The small header above the chat: what the conversation runs with (its system prompt and
sampler), and a button that opens the dialog to change them for this conversation."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.config import Config
from workbench.ui.chat.conversation_settings import KEYS, summary
from workbench.ui.chat.qt_file_button import QtFileButton
from workbench.ui.chat.qt_schema_file import schema_file_button
from workbench.ui.chat.tools_file import ToolsFile, read_tools_file
from workbench.ui.qt_plain_label import plain_label
from workbench.ui.settings.qt_settings_panel import QtSettingsPanel


class QtConversationHeader(QWidget):
    edit_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # Word-wrapped: a narrow chat column gives it a second line, never a cut.
        self.label = plain_label()
        self.label.setWordWrap(True)
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.button = QToolButton()
        self.button.setText("Conversation settings…")
        self.button.setToolTip("The system prompt, sampling settings and answer format of this "
                               "conversation (a new one starts from the Settings dock's)")
        self.button.setAutoRaise(True)
        self.button.clicked.connect(self.edit_requested)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 2, 6, 2)
        row.addWidget(self.label, 1)
        row.addWidget(self.button)

    def show_config(self, config: Config) -> None:
        self.label.setText(summary(config))


class QtConversationSettingsDialog(QDialog):
    """The conversation's own settings, with the settings panel's editors and checks, and
    buttons that load the answer schema and the tools from files."""

    def __init__(self, config: Config, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Conversation settings")
        self.panel = QtSettingsPanel(config, only=KEYS)
        self.chosen: Config | None = None
        self.panel.applied.connect(self._applied)
        self.schema_file = schema_file_button()
        self.schema_file.loaded.connect(self._schema_loaded)
        self.tools_file = QtFileButton(
            "Load tools file…", "Read the tools the model may call from a JSON file of OpenAI "
            "tool declarations (each may name a local command that answers its calls)",
            "Choose a tools file", "Tools files (*.json);;All files (*)", read_tools_file)
        self.tools_file.loaded.connect(self._tools_loaded)
        column = QVBoxLayout(self)
        column.addWidget(self.panel)
        column.addWidget(self.schema_file)
        column.addWidget(self.tools_file)
        self.resize(460, 560)

    def _schema_loaded(self, text: str) -> None:
        """A schema file's text becomes the pending schema; the panel says if it cannot hold."""
        self.panel.set_pending(self.panel.pending.replace(answer_format="schema",
                                                          answer_schema=text))

    def _tools_loaded(self, tools: ToolsFile) -> None:
        """A tools file's declaration becomes the pending tools (a file the reader refused
        said why under the button, and changed nothing)."""
        self.panel.set_pending(self.panel.pending.replace(tools=tools.declaration))

    async def choose(self) -> Config | None:
        """Show the dialog without a nested event loop; the settings applied, or None."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.finished.connect(lambda code: done.done() or done.set_result(code))
        self.open()
        await done
        return self.chosen

    def _applied(self, config: Config, _reopen: bool) -> None:
        self.chosen = config
        self.accept()
