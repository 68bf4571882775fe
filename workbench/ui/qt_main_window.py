"""The main window: conversations (left), chat (centre), docks for live telemetry, settings and
runs (tabbed on the right, each detachable), status bar.

The window wires widgets to the chat and conversation controllers and runs model loading; all
of its work is coroutines spawned through `Tasks`, so a failure shows up in the notice bar
instead of vanishing. Construct it with a bridge and a database worker (tests pass their own).
Applying settings is the window's job: load-time changes go through the same load path as
File > Open model, per-request ones go to the open session on the engine thread.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QShortcut,
)
from PySide6.QtWidgets import QDockWidget, QMainWindow, QSplitter, QVBoxLayout, QWidget

from workbench import paths
from workbench.config import Config, signature
from workbench.engine.chat.think import ThinkControl, think_control_note
from workbench.engine.requests import SessionError
from workbench.store import StoreFault
from workbench.ui import store_notices
from workbench.ui.bridge import EngineBridge, LoadCancelled, LoadedModel
from workbench.ui.chat import conversation_settings
from workbench.ui.chat.qt_chat_view import QtChatView
from workbench.ui.chat.qt_composer import QtComposer
from workbench.ui.chat.qt_conversation_header import (
    QtConversationHeader,
    QtConversationSettingsDialog,
)
from workbench.ui.chat_controller import ChatController
from workbench.ui.conversations.qt_controller import ConversationsController
from workbench.ui.conversations.qt_conversation_list import QtConversationList
from workbench.ui.db_worker import AsyncStore, StoreInUse
from workbench.ui.models.qt_model_picker import QtModelPicker
from workbench.ui.models.recent import add_recent, recent_file
from workbench.ui.qt_notice_bar import QtNoticeBar
from workbench.ui.qt_status_bar import QtStatusBar
from workbench.ui.qt_theme import apply_theme, plot_colours
from workbench.ui.runs.qt_matrix_dialog import QtMatrixDialog
from workbench.ui.runs.qt_runs_page import QtRunsPage
from workbench.ui.settings.qt_settings_page import QtSettingsPage
from workbench.ui.tasks import Tasks
from workbench.ui.telemetry.qt_cache_sizing import QtCacheSizing
from workbench.ui.telemetry.qt_expert_map import QtExpertMap
from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel
from workbench.ui.ui_collector import TICK_MS as COLLECT_TICK_MS
from workbench.ui.ui_collector import shared_collector
from workbench.ui.ui_pacer import shared_pacer, ui_share_target
from workbench.ui.window_memory import (
    THEMES,
    WindowMemory,
    load_memory,
    save_memory,
    startup_config,
)

log = logging.getLogger("workbench.ui")
SHUTDOWN_GRACE_S = 10.0
CHAT_MIN_WIDTH = 300  # px: a message line still holds a few words
DEFAULT_SIZE = QSize(1440, 900)  # on a smaller screen: the screen's free area (_initial_size)
STATUS_NOTE_MS = 5000  # how long a transient status-bar note stays
_DOCK_FEATURES = (QDockWidget.DockWidgetFeature.DockWidgetMovable
                  | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                  | QDockWidget.DockWidgetFeature.DockWidgetClosable)


def _sentence(text: str) -> str:
    """A warning as a sentence of the notice (the CLI's read "warning: ...")."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _initial_size() -> QSize:
    """The default size, shrunk to the primary screen's free area: a 1440 x 900 window on a
    1280 x 720 screen would open past its edges. (The layout keeps it at least its minimum.)"""
    screen = QGuiApplication.primaryScreen()
    if screen is None:
        return DEFAULT_SIZE
    return DEFAULT_SIZE.boundedTo(screen.availableGeometry().size())


class QtMainWindow(QMainWindow):
    closing = Signal()

    def __init__(self, bridge: EngineBridge, db: AsyncStore, config: Config,
                 data: Path | None = None) -> None:
        super().__init__()
        # No dock animations: with them every re-layout of the window (a status label that
        # grows) creates an animation object per dock, several times a second while streaming.
        self.setAnimated(False)
        self.setWindowTitle("Workbench")
        self.resize(_initial_size())
        self.bridge, self.db, self.config = bridge, db, config
        # The Settings dock's settings: a new conversation starts from them; one with settings
        # of its own (conversation_settings.py) runs with those while it is open.
        self.global_config = config
        self.data = data or paths.data_dir()  # conversations, recent models, bench runs
        # Cycles are collected here, on the UI thread, never on the engine's or the database's
        # (ui_collector.py: a collection there destroyed Qt objects and deadlocked the window).
        shared_collector().install()
        self._collect_timer = QTimer()  # no parent: shutdown() may run after the C++ window is gone
        self._collect_timer.timeout.connect(shared_collector().tick)
        self._collect_timer.start(COLLECT_TICK_MS)
        self.tasks = Tasks(on_error=self._background_error)
        self.loading = False
        self.closed = asyncio.Event()
        # One settings change at a time: a second Apply waits for the first's reload to end.
        self._applying = asyncio.Lock()

        self.conversation_list = QtConversationList()
        self.chat_view = QtChatView()
        self.notice = QtNoticeBar()
        # The conversation database's own bar: it stays while the window runs on a temporary
        # store (a model loading, which clears the notice bar's errors, leaves it alone).
        self.store_banner = QtNoticeBar()
        self._store_state: tuple[str, list[str], bool] | None = None
        self.composer = QtComposer()
        centre = QWidget()
        centre.setMinimumWidth(CHAT_MIN_WIDTH)
        column = QVBoxLayout(centre)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.conversation_header = QtConversationHeader()
        column.addWidget(self.conversation_header)
        column.addWidget(self.chat_view, 1)
        column.addWidget(self.store_banner)
        column.addWidget(self.notice)
        column.addWidget(self.composer)
        splitter = QSplitter()
        splitter.addWidget(self.conversation_list)
        splitter.addWidget(centre)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([230, 700])
        self.setCentralWidget(splitter)
        self.telemetry = QtTelemetryPanel()
        self.telemetry_dock = self._dock("Live telemetry", "telemetryDock", self.telemetry)
        self.expert_map = QtExpertMap()
        self.expert_dock = self._dock("Expert activity", "expertActivityDock", self.expert_map)
        self.cache_sizing = QtCacheSizing()
        self.cache_sizing.set_model(None)
        self.cache_dock = self._dock("Cache sizing", "cacheSizingDock", self.cache_sizing)
        self.settings_page = QtSettingsPage(config, db.call)
        self.settings_dock = self._dock("Settings", "settingsDock", self.settings_page)
        self.runs_page = QtRunsPage(db.call, config, data=self.data)
        self.runs_dock = self._dock("Runs", "runsDock", self.runs_page)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.telemetry_dock)
        self.tabifyDockWidget(self.telemetry_dock, self.expert_dock)
        self.tabifyDockWidget(self.expert_dock, self.cache_dock)
        self.tabifyDockWidget(self.cache_dock, self.settings_dock)
        self.tabifyDockWidget(self.settings_dock, self.runs_dock)
        self.telemetry_dock.raise_()  # live telemetry is the tab in front while chatting
        self.resizeDocks([self.telemetry_dock], [620], Qt.Orientation.Horizontal)
        self.status = QtStatusBar()
        self.setStatusBar(self.status)

        self.chat = ChatController(
            bridge, db, self.chat_view, self.composer, self.telemetry, self.status, config,
            on_conversations_changed=lambda: self.tasks.spawn(
                self.conversations.refresh(), name="refresh-list"),
            on_turn_finished=self._turn_finished, expert_map=self.expert_map,
            show_error=self.notice.show_error, use_settings=self._use_conversation_settings,
        )
        self.conversations = ConversationsController(
            db, self.conversation_list, self.notice, self._open_conversation,
            lambda: self.chat.conversation_id, self.tasks.spawn, self,
            forget_state=lambda cid: bridge.forget_conversation(str(cid)),
        )
        db.on_fault = self._store_fault
        # What the last window on this data directory left (window_memory.py): its layout and
        # theme now, its conversation and model once start() runs.
        self.memory = load_memory(self.data)
        self._memory_taken = False
        self._connect()
        self._build_menus()
        self.setAcceptDrops(True)
        self.chat.model_ready(None)
        self.set_theme(self.memory.theme)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._scheme_changed)
        self._restore_layout()

    def _dock(self, title: str, name: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(_DOCK_FEATURES)
        return dock

    # ---- wiring -------------------------------------------------------------------------------

    def _connect(self) -> None:
        spawn = self.tasks.spawn
        self.composer.send_requested.connect(lambda text: spawn(self.chat.send(text)))
        self.composer.prompt.textChanged.connect(
            lambda: self.chat.draft_changed(self.composer.prompt.toPlainText()))
        self.composer.stop_requested.connect(self.chat.stop)
        self.chat_view.regenerate_requested.connect(lambda mid: spawn(self.chat.regenerate(mid)))
        self.chat_view.continue_requested.connect(
            lambda mid: spawn(self.chat.continue_answer(mid)))
        self.chat_view.edit_submitted.connect(lambda mid, text: spawn(self.chat.edit(mid, text)))
        self.chat_view.version_requested.connect(
            lambda mid: spawn(self.chat.switch_version(mid), name="open-conversation"))
        self.chat_view.token_clicked.connect(self.telemetry.highlight)
        self.telemetry.span_selected.connect(self.chat_view.mark_span)
        self.telemetry.headline_updated.connect(self._live_rate)
        self.status.cancel_load_requested.connect(self.bridge.cancel_open)
        self.settings_page.applied.connect(
            lambda config, reopen: spawn(self.apply_settings(config, reopen)))
        self.settings_page.rerun_with.connect(lambda config: spawn(self.rerun_with(config)))
        self.conversation_header.edit_requested.connect(
            lambda: spawn(self.edit_conversation_settings(), name="conversation-settings"))
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
        view_menu.addAction(self.expert_dock.toggleViewAction())
        view_menu.addAction(self.cache_dock.toggleViewAction())
        # "Show", not a toggle: a dock behind another tab is open but unseen, and a toggle
        # would close it instead of bringing it to the front.
        self._action(view_menu, "&Settings", "Ctrl+,", lambda: self.show_dock(self.settings_dock))
        self._action(view_menu, "&Runs", "", lambda: self.show_dock(self.runs_dock))
        theme_menu = view_menu.addMenu("&Theme")
        self._theme_actions: dict[str, QAction] = {}
        group = QActionGroup(self)
        for choice, text in zip(THEMES, ("Follow the &system", "&Light", "&Dark"), strict=True):
            action = theme_menu.addAction(text)
            action.setCheckable(True)
            action.triggered.connect(lambda _=False, c=choice: self.set_theme(c))
            group.addAction(action)
            self._theme_actions[choice] = action
        tools_menu = self.menuBar().addMenu("&Tools")
        self._action(tools_menu, "Bench &matrix…", "",
                     lambda: spawn(self.open_bench_matrix(), name="bench-matrix"))
        self._action(tools_menu, "Save route &trace of the last answer", "",
                     lambda: spawn(self.save_route_trace(), name="route-trace"))

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

    def show_dock(self, dock: QDockWidget) -> None:
        dock.show()
        dock.raise_()

    async def open_bench_matrix(self) -> QtMatrixDialog:
        self.show_dock(self.runs_dock)  # the matrix's runs land in this list when it finishes
        return await self.runs_page.open_matrix_dialog()

    async def _open_conversation(self, conversation_id: int | None) -> None:
        await self.chat.open_conversation(conversation_id)
        if self.bridge.loaded:
            self.cache_sizing.request(self._conversation_routes)  # its routing, if any

    def _turn_finished(self) -> None:
        self._refresh_runs()
        self.cache_sizing.request(self._conversation_routes)

    async def _conversation_routes(self, last_turn: bool = False):
        cid = self.chat.conversation_id
        return await self.bridge.route_trace(None if cid is None else str(cid), last_turn)

    async def save_route_trace(self) -> Path | None:
        """Write the last answer's routing as a route trace into the data directory (for
        `workbench replay`), off the UI thread; the notice bar says where, or why not."""
        from workbench.ui.route_trace_files import save_trace

        trace = await self._conversation_routes(last_turn=True) if self.bridge.loaded else None
        if trace is None or not trace.loads:
            self.notice.show_error("No routing to save: route traces need a model opened with "
                                   "expert streaming, and an answer in this conversation.")
            return None
        try:
            path = await asyncio.get_running_loop().run_in_executor(
                None, save_trace, self.data, trace)
        except OSError as exc:
            self.notice.show_error(f"The route trace was not saved: {exc}")
            return None
        self.notice.show_info(f"Saved the route trace {path}; replay it with "
                              f"`workbench replay {path}`.")
        return path

    def _refresh_runs(self) -> None:
        # Same name as the page's own filter refresh: the latest listing wins.
        self.runs_page.tasks.spawn(self.runs_page.refresh(), name="refresh")

    # ---- start, models ------------------------------------------------------------------------

    async def start(self, load_model: bool = True) -> None:
        """Fill the conversation list and open the conversation the last window had open, then
        load the configured model (the bundled default when none is set) so the window is
        ready to chat."""
        self._show_store_state()
        await self.conversations.refresh()
        last = self.memory.conversation_id
        if last is not None and last in self.conversation_list.ids():
            await self.conversations.open(last)
        # The pages fill in the background, each showing its own failure.
        self.settings_page.tasks.spawn(self.settings_page.start(), name="presets")
        self._refresh_runs()
        if load_model:
            await self.load_model(self.config)
            # The remembered model has gone (the CLI started from the defaults instead).
            vanished = startup_config(self.memory).notice
            if vanished and not self.config.model:
                self.notice.show_info(vanished)

    # ---- what the window remembers --------------------------------------------------------

    def set_theme(self, choice: str) -> None:
        """Light, dark, or the desktop's scheme; the plots follow."""
        self.theme = choice
        self.resolved_theme = apply_theme(choice)
        self.telemetry.set_colours(plot_colours())
        self.expert_map.set_colours(plot_colours())
        self._theme_actions[choice].setChecked(True)
        self.memory.theme = choice

    def _scheme_changed(self, *_: object) -> None:
        if self.theme == "system":
            self.set_theme("system")

    def _restore_layout(self) -> None:
        geometry = WindowMemory.decode(self.memory.geometry)
        if geometry:
            self.restoreGeometry(QByteArray(geometry))
        state = WindowMemory.decode(self.memory.dock_state)
        if state:
            self.restoreState(QByteArray(state))

    def _take_memory(self) -> WindowMemory:
        """The window as it is now (read while its widgets exist, written off the UI thread)."""
        memory = self.memory
        if not self._memory_taken:
            memory.geometry = WindowMemory.encode(bytes(self.saveGeometry().data()))
            memory.dock_state = WindowMemory.encode(bytes(self.saveState().data()))
            memory.conversation_id = self.chat.conversation_id
            memory.theme = self.theme
            self._memory_taken = True
        return memory

    async def _save_memory(self, memory: WindowMemory) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, save_memory, self.data,
                                                             memory)
        except OSError as exc:
            # A convenience, not the user's work: the next start opens as a first one. (No
            # notice: this also runs at shutdown, when the window's widgets may be gone.)
            log.warning("the window's layout and last model were not remembered: %s", exc)

    async def pick_model(self, preselect: str | None = None) -> None:
        picker = QtModelPicker(self.config, self, preselect=preselect,
                               recent=recent_file(self.data), data=self.data)
        config = await picker.choose()
        picker.deleteLater()
        if config is not None:
            await self.load_model(config)

    async def load_model(self, config: Config, reopening: bool = False) -> LoadedModel | None:
        """Load with progress and Cancel; failures are explained, and the app keeps running.

        `reopening`: the same model again with new load-time settings (the status bar says so).
        """
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
        self.status.set_model(f"reopening the model ({name}) with the new settings…"
                              if reopening else f"loading {name}…")
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
        shared_pacer().target_share = ui_share_target(model.config.n_threads)
        self.chat.model_ready(model)
        self.cache_sizing.set_model(model)
        self._show_config(model.config)
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
        if model.warnings:  # the settings work, but badly (the expert cache cliff): say so
            self.notice.show_error(" ".join(_sentence(w) for w in model.warnings))
        elif "synthetic" in model.name.lower():
            self.notice.show_info("This is a synthetic MoE with random weights: it exercises "
                                  "expert streaming, and its text is noise.")
        elif self.notice.kind == "error":
            self.notice.dismiss()
        if model.config.model:
            self.tasks.spawn(self._remember(model.config.model))
        # The next start opens this model with these settings (saved now: a crash keeps it).
        self.memory.settings = model.config.to_dict()
        self.tasks.spawn(self._save_memory(self.memory), name="window-memory")

    async def _remember(self, model: str) -> None:
        recent = recent_file(self.data)
        try:
            await asyncio.get_running_loop().run_in_executor(None, add_recent, model, recent)
        except OSError as exc:  # the model is open all the same; only the list is behind
            self.notice.show_error(f"The list of recent models was not updated: {exc}")

    def _show_config(self, config: Config) -> None:
        """The pages show the settings in force. The settings page is only reset when it
        shows something else, so edits made meanwhile survive an apply that changed nothing."""
        if self.settings_page.panel.current != config:
            self.settings_page.set_config(config)
        self.runs_page.set_config(config)
        self.conversation_header.show_config(config)

    # ---- settings -----------------------------------------------------------------------------

    def _needs_reopen(self, config: Config) -> bool:
        return signature(config) != signature(self.config)

    async def apply_settings(self, config: Config, reopen: bool) -> bool:
        """The settings dock's Apply. Load-time changes reopen the model through the usual load
        path; per-request ones go to the open session on the engine thread, with no reload.
        On failure the dock goes back to the settings in force."""
        async with self._applying:
            ok = await self._apply(config, reopen or self._needs_reopen(config))
        if not ok:
            self.settings_page.set_config(self.config)
            return ok
        self.global_config = self.config
        cid = self.chat.conversation_id
        if cid is not None:  # the open conversation is used with them from now on
            await self._keep_conversation_settings(cid)
        return ok

    # ---- a conversation's own settings ---------------------------------------------------------

    async def _use_conversation_settings(self, conversation_id: int | None,
                                         stored: dict[str, object]) -> None:
        """Opening a conversation: run with its own settings (a new one: the global ones)."""
        source = (conversation_settings.config_for(self.global_config, stored)
                  if conversation_id is not None else self.global_config)
        wanted = conversation_settings.settings_of(source)
        if wanted == conversation_settings.settings_of(self.config):
            self.conversation_header.show_config(self.config)
            return
        async with self._applying:
            await self._apply(self.config.replace(**wanted), reopen=False, quiet=True)

    async def edit_conversation_settings(self) -> bool:
        """The header's dialog: this conversation's system prompt and sampling settings."""
        dialog = QtConversationSettingsDialog(self.config, self)
        chosen = await dialog.choose()
        dialog.deleteLater()
        if chosen is None:
            return False
        async with self._applying:
            ok = await self._apply(self.config.replace(
                **conversation_settings.settings_of(chosen)), reopen=False)
        cid = self.chat.conversation_id
        if ok and cid is not None:
            await self._keep_conversation_settings(cid)
        return ok

    async def _keep_conversation_settings(self, conversation_id: int) -> None:
        used = conversation_settings.settings_of(self.config)
        try:
            await self.db.call(lambda s: s.set_conversation_settings(conversation_id, used))
        except Exception as exc:  # the settings apply all the same; only the memory is behind
            self.notice.show_error(f"The conversation's settings were not saved ({exc}); they "
                                   "apply until another conversation is opened.")

    async def _apply(self, config: Config, reopen: bool, quiet: bool = False) -> bool:
        if self.loading:
            if not quiet:  # a conversation opened meanwhile keeps the settings being loaded
                self.notice.show_error("A model is loading: wait for it, then apply the "
                                       "settings.")
            return False
        if reopen:
            return await self.load_model(config, reopening=True) is not None
        if self.chat.model is None:  # nothing is open: the next load starts from these
            self.config = self.chat.config = config
            self._show_config(config)
            return True
        try:  # queued behind a streaming answer, if any: it applies from the next one
            model = await self.bridge.apply_request_settings(config)
        except SessionError as exc:
            self.notice.show_error(f"Could not apply the settings: {exc}")
            return False
        think_changed = model.config.think != self.config.think
        self.config = model.config
        self.chat.settings_changed(model)
        if think_changed and self.composer.think.isEnabled():
            self.composer.think.setChecked(model.config.think)
        self._show_config(model.config)
        if not quiet:
            self.status.showMessage("Settings applied: the next answer uses them.",
                                    STATUS_NOTE_MS)
        return True

    async def rerun_with(self, config: Config) -> bool:
        """Answer the last question again with `config` (a preset): apply it (reopening only
        when a load-time setting differs), then regenerate the last answer as a sibling. The
        first answer and its run are kept, so the two runs can be compared."""
        if self.chat.model is None:
            self.notice.show_error("Open a model first, then re-run a turn with a preset.")
            return False
        if self.chat.generating:
            self.notice.show_error("Stop the answer first, then re-run the turn.")
            return False
        if self.chat.last_answer_id is None:
            self.notice.show_error("Nothing to re-run yet: ask something, then re-run the "
                                   "turn with a preset.")
            return False
        if not await self.apply_settings(config, self._needs_reopen(config)):
            return False
        answer_id = self.chat.last_answer_id  # read again: the apply awaited
        if answer_id is None:
            return False
        await self.chat.regenerate(answer_id)
        return True

    # ---- the conversation database's faults -------------------------------------------------

    def _show_store_state(self) -> None:
        """The store banner for a window on a temporary store (a damaged, newer, read-only or
        full file: workbench/ui/store_notices.py), and a title that says so."""
        fault = self.db.fault
        if fault is None or not self.db.temporary:
            self.setWindowTitle("Workbench")
            return
        text, labels = store_notices.at_open(fault, self.db.copied_conversations)
        self._banner(text, labels, closable=False)
        self.setWindowTitle("Workbench (temporary store: nothing is saved)")

    def _banner(self, text: str, labels: list[str], closable: bool) -> None:
        self._store_state = (text, labels, closable)
        spawn = self.tasks.spawn
        actions = {
            store_notices.SALVAGE: lambda: spawn(self.start_fresh(True), name="store"),
            store_notices.START_FRESH: lambda: spawn(self.start_fresh(False), name="store"),
            store_notices.TRY_AGAIN: lambda: spawn(self.retry_store(), name="store"),
        }
        pairs = [(label, actions[label]) for label in labels]
        label, callback = pairs[0] if pairs else ("", None)
        self.store_banner.show_error(text, label, callback, more=pairs[1:], closable=closable)

    def _restore_banner(self) -> None:
        if self._store_state is not None:
            self._banner(*self._store_state)

    def _store_fault(self, fault: StoreFault) -> None:
        """A database call failed because of the file or its place (a disk that filled up)."""
        if self.db.temporary:
            return  # the banner already says nothing is saved
        self._banner(*store_notices.in_use(fault), closable=True)

    async def start_fresh(self, salvaging: bool) -> bool:
        """The store banner's Salvage / Move aside: the damaged file is renamed (kept), a new
        one takes its place, and what can be read of the old one (with `salvaging`) and what
        was written in the temporary store meanwhile are copied in, on the database worker."""
        if self.chat.generating:
            self._restore_banner()
            self.notice.show_error("Stop the answer first, then move the damaged database aside.")
            return False
        self.status.showMessage("Salvaging the damaged database…" if salvaging
                                else "Moving the damaged database aside…")
        try:
            done = await self.db.start_fresh(salvaging)
        except StoreInUse as exc:
            self._restore_banner()
            self.notice.show_error(f"Another workbench window has this database open ({exc}). "
                                   "Close it, then try again.")
            return False
        except StoreFault as fault:  # the new file cannot be made here either
            self._show_store_state()
            self.notice.show_error(f"Could not start a new database: {fault.detail}.")
            return False
        except OSError as exc:
            self._restore_banner()
            self.notice.show_error(f"Could not move the damaged database aside: "
                                   f"{exc.strerror or exc}. It is unchanged; make its folder "
                                   "writable, then try again.")
            return False
        finally:
            self.status.clearMessage()
        self._store_state = None
        self.setWindowTitle("Workbench")
        await self._reload_store()
        self.store_banner.show_info(store_notices.rebuilt(done.aside, done.salvaged, done.merged))
        return True

    async def retry_store(self) -> bool:
        """The store banner's Try again: the real file, with what the temporary store gained."""
        if self.chat.generating:
            self._restore_banner()
            self.notice.show_error("Stop the answer first, then try the database again.")
            return False
        try:
            merged = await self.db.retry()
        except StoreFault:
            self._show_store_state()  # the fault that still stands, said again
            self.notice.show_error("The conversation database still cannot be used; see "
                                   "the message above.")
            return False
        self._store_state = None
        self.setWindowTitle("Workbench")
        assert self.db.path is not None
        await self._reload_store()
        self.store_banner.show_info(store_notices.retried(self.db.path, merged))
        return True

    async def _reload_store(self) -> None:
        """Everything shown from the database, again: its ids changed with the file."""
        await self.conversations.open(None)
        await self.conversations.refresh()
        self.settings_page.tasks.spawn(self.settings_page.start(), name="presets")
        self._refresh_runs()

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
        self._take_memory()
        self.closed.set()
        self.closing.emit()
        super().closeEvent(event)

    async def shutdown(self) -> None:
        """Stop any answer, let the final save land, free the model, close the database."""
        self.bridge.cancel()
        self.bridge.cancel_open()
        await self.chat.cancel_title()
        await self.chat.close()
        await self._save_memory(self._take_memory())
        # The window's own first: the stopped answer's final save is one of its tasks, and a
        # finished turn spawns a runs refresh on the runs page. All of them use the database.
        for tasks in (self.tasks, self.settings_page.tasks, self.runs_page.tasks):
            try:
                await asyncio.wait_for(tasks.wait_idle(), SHUTDOWN_GRACE_S)
            except TimeoutError:
                tasks.cancel_all()
        await self.bridge.close()
        await self.db.close()
        self._collect_timer.stop()
        gc.collect()  # this window's cycles, on this thread, before automatic collection resumes
        shared_collector().uninstall()
