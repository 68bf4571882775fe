"""The main window: conversations (left), chat (centre), telemetry (a detachable dock), status bar.

The window wires widgets to the chat and conversation controllers and runs model loading; all
of its work is coroutines spawned through `Tasks`, so a failure shows up in the notice bar
instead of vanishing. Construct it with a bridge and a database worker (tests pass their own).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QShortcut,
)
from PySide6.QtWidgets import QDockWidget, QMainWindow, QSplitter, QVBoxLayout, QWidget

from workbench.config import Config
from workbench.engine.chat.think import ThinkControl, think_control_note
from workbench.engine.session import SessionError
from workbench.ui.bridge import EngineBridge, LoadCancelled, LoadedModel
from workbench.ui.chat.qt_chat_view import QtChatView
from workbench.ui.chat.qt_composer import QtComposer
from workbench.ui.chat_controller import ChatController
from workbench.ui.conversations.controller import ConversationsController
from workbench.ui.conversations.qt_conversation_list import QtConversationList
from workbench.ui.db_worker import AsyncStore
from workbench.ui.models.qt_model_picker import QtModelPicker
from workbench.ui.models.recent import add_recent
from workbench.ui.qt_notice_bar import QtNoticeBar
from workbench.ui.qt_status_bar import QtStatusBar
from workbench.ui.tasks import Tasks
from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel

SHUTDOWN_GRACE_S = 10.0


class QtMainWindow(QMainWindow):
    closing = Signal()

    def __init__(self, bridge: EngineBridge, db: AsyncStore, config: Config) -> None:
        super().__init__()
        self.setWindowTitle("Workbench")
        self.resize(1440, 900)
        self.bridge, self.db, self.config = bridge, db, config
        self.tasks = Tasks(on_error=self._background_error)
        self.loading = False
        self.closed = asyncio.Event()

        self.conversation_list = QtConversationList()
        self.chat_view = QtChatView()
        self.notice = QtNoticeBar()
        self.composer = QtComposer()
        centre = QWidget()
        column = QVBoxLayout(centre)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.chat_view, 1)
        column.addWidget(self.notice)
        column.addWidget(self.composer)
        splitter = QSplitter()
        splitter.addWidget(self.conversation_list)
        splitter.addWidget(centre)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([230, 700])
        self.setCentralWidget(splitter)
        self.telemetry = QtTelemetryPanel()
        self.telemetry_dock = QDockWidget("Live telemetry", self)
        self.telemetry_dock.setObjectName("telemetryDock")
        self.telemetry_dock.setWidget(self.telemetry)
        self.telemetry_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                                        | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                                        | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.telemetry_dock)
        self.resizeDocks([self.telemetry_dock], [620], Qt.Orientation.Horizontal)
        self.status = QtStatusBar()
        self.setStatusBar(self.status)

        self.chat = ChatController(
            bridge, db, self.chat_view, self.composer, self.telemetry, self.status, config,
            on_conversations_changed=lambda: self.tasks.spawn(
                self.conversations.refresh(), name="refresh-list"),
        )
        self.conversations = ConversationsController(
            db, self.conversation_list, self.notice, self.chat.open_conversation,
            lambda: self.chat.conversation_id, self.tasks.spawn, self,
        )
        self._connect()
        self._build_menus()
        self.setAcceptDrops(True)
        self.chat.model_ready(None)

    # ---- wiring -------------------------------------------------------------------------------

    def _connect(self) -> None:
        spawn = self.tasks.spawn
        self.composer.send_requested.connect(lambda text: spawn(self.chat.send(text)))
        self.composer.stop_requested.connect(self.chat.stop)
        self.chat_view.regenerate_requested.connect(lambda mid: spawn(self.chat.regenerate(mid)))
        self.chat_view.edit_submitted.connect(lambda mid, text: spawn(self.chat.edit(mid, text)))
        self.chat_view.version_requested.connect(
            lambda mid: spawn(self.chat.switch_version(mid), name="open-conversation"))
        self.chat_view.token_clicked.connect(self.telemetry.highlight)
        self.telemetry.headline_updated.connect(self._live_rate)
        self.status.cancel_load_requested.connect(self.bridge.cancel_open)
        stop = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        stop.setContext(Qt.ShortcutContext.WindowShortcut)
        stop.activated.connect(self.chat.stop)
        self._stop_shortcut = stop

    def _build_menus(self) -> None:
        spawn = self.tasks.spawn
        file_menu = self.menuBar().addMenu("&File")
        self._action(file_menu, "&Open model…", "Ctrl+O",
                     lambda: spawn(self.pick_model(), name="pick-model"))
        self._action(file_menu, "&Import conversation…", "",
                     lambda: spawn(self.conversations.import_dialog()))
        self._action(file_menu, "Export conversation as &Markdown…", "", lambda: self._export("md"))
        self._action(file_menu, "Export conversation as &JSON…", "", lambda: self._export("json"))
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", "Ctrl+Q", self.close)
        chat_menu = self.menuBar().addMenu("&Chat")
        self._action(chat_menu, "&New conversation", "Ctrl+N",
                     lambda: spawn(self.conversations.open(None), name="open-conversation"))
        self._action(chat_menu, "&Copy chat", "Ctrl+Shift+C", self.copy_chat)
        self._action(chat_menu, "&Stop answer", "", self.chat.stop)
        view_menu = self.menuBar().addMenu("&View")
        view_menu.addAction(self.telemetry_dock.toggleViewAction())

    def _action(self, menu, text: str, shortcut: str, slot) -> QAction:
        action = menu.addAction(text)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        return action

    def _export(self, fmt: str) -> None:
        cid = self.chat.conversation_id
        if cid is None:
            self.notice.show_error("Open a conversation first, then export it.")
            return
        self.tasks.spawn(self.conversations.export_dialog(cid, fmt))

    def _live_rate(self, headline: object) -> None:
        if self.chat.generating:
            self.status.set_rate(headline.tok_s)  # type: ignore[attr-defined]

    def copy_chat(self) -> None:
        QGuiApplication.clipboard().setText(self.chat_view.transcript())

    # ---- start, models ------------------------------------------------------------------------

    async def start(self, load_model: bool = True) -> None:
        """Fill the conversation list, then load the configured model (the bundled default when
        none is set) so the window is ready to chat."""
        await self.conversations.refresh()
        if load_model:
            await self.load_model(self.config)

    async def pick_model(self, preselect: str | None = None) -> None:
        picker = QtModelPicker(self.config, self, preselect=preselect)
        config = await picker.choose()
        picker.deleteLater()
        if config is not None:
            await self.load_model(config)

    async def load_model(self, config: Config) -> LoadedModel | None:
        """Load with progress and Cancel; failures are explained, and the app keeps running."""
        if self.chat.generating:
            self.notice.show_error("Stop the answer first, then open another model.")
            return None
        if self.loading:
            self.bridge.cancel_open()
            return None
        self.loading = True
        self.chat.model_ready(None)
        self.status.set_state("loading")
        self.status.set_loading(0.0)
        name = Path(config.model).name if config.model else "the bundled model"
        self.status.set_model(f"loading {name}…")
        model: LoadedModel | None = None
        try:
            model = await self.bridge.open(config, self._load_progress)
        except LoadCancelled:
            self.notice.show_info("Loading was cancelled; no model is loaded. Open one with "
                                  "File > Open model….")
        except SessionError as exc:
            self.notice.show_error(f"Could not open {name}: {exc}")
        except Exception as exc:  # e.g. the bundled model cannot be assembled: say so, go on
            self.notice.show_error(f"Could not open {name}: {exc}. Pick another model with "
                                   "File > Open model….")
        finally:
            self.loading = False
            self.status.set_loading(None)
        if model is None:
            self.status.set_state("no model")
            self.status.set_model("no model: File > Open model…")
            return None
        self._model_loaded(model)
        return model

    def _load_progress(self, fraction: float) -> None:
        self.status.set_loading(fraction)
        self.status.set_state("loading", f"{fraction:.0%}")

    def _model_loaded(self, model: LoadedModel) -> None:
        self.config = model.config
        self.chat.model_ready(model)
        self.status.set_model(f"{model.name} · {model.arch} · {model.n_ctx} context · "
                              f"loaded in {model.load_seconds:.1f} s")
        self.status.set_state("idle")
        control = ThinkControl(model.think_control)
        if model.chat_mode:
            self.composer.set_think_control(control.value, think_control_note(control),
                                            model.config.think)
        else:
            self.composer.set_think_control("none", "raw text: no chat template", False)
            self.composer.think.setChecked(False)
        if "synthetic" in model.name.lower():
            self.notice.show_info("This is a synthetic MoE with random weights: it exercises "
                                  "expert streaming, and its text is noise.")
        elif self.notice.kind == "error":
            self.notice.dismiss()
        if model.config.model:
            self.tasks.spawn(self._remember(model.config.model))

    async def _remember(self, model: str) -> None:
        await asyncio.get_running_loop().run_in_executor(None, add_recent, model)

    # ---- drag and drop ------------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(u.toLocalFile().endswith(".gguf") for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        files = [u.toLocalFile() for u in event.mimeData().urls() if u.toLocalFile()]
        if files:
            self.tasks.spawn(self.pick_model(preselect=files[0]), name="pick-model")

    # ---- errors and shutdown ------------------------------------------------------------------

    def _background_error(self, exc: BaseException) -> None:
        self.notice.show_error(f"Something went wrong: {exc}. Your conversations are saved; "
                               "try again, and restart the app if this repeats.")

    def keyPressEvent(self, event: QKeyEvent) -> None:
        # Esc reaches here from any child that does not use it (the shortcut needs an active
        # window; this path does not).
        if event.key() == Qt.Key.Key_Escape:
            self.chat.stop()
            return
        super().keyPressEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closed.set()
        self.closing.emit()
        super().closeEvent(event)

    async def shutdown(self) -> None:
        """Stop any answer, let the final save land, free the model, close the database."""
        self.bridge.cancel()
        self.bridge.cancel_open()
        try:  # the stopped answer's final save is one of these tasks
            await asyncio.wait_for(self.tasks.wait_idle(), SHUTDOWN_GRACE_S)
        except TimeoutError:
            self.tasks.cancel_all()
        await self.bridge.close()
        await self.db.close()
