"""The main window: conversations (left), chat (centre), docks for live telemetry, settings and
runs (tabbed on the right, each detachable), status bar.

The window assembles the docks and menus and wires widgets to the controllers; all of its work
is coroutines spawned through `Tasks`, so a failure shows up in the notice bar instead of
vanishing. Construct it with a bridge and a database worker (tests pass their own).

Each idea has its own home: the settings in force and the model's lifecycle are the session
controller's (`session_controller.py`, shown by `session_view.py`), the chat's turns the chat
controller's (`chat/controller.py`), the store banner `store_banner.py` and its buttons
`store_salvage.py`, what the window remembers `qt_window_memory.py`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QFontDatabase,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QResizeEvent,
    QShortcut,
)
from PySide6.QtWidgets import (
    QDockWidget,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from workbench import paths
from workbench.config import Config
from workbench.ui import shortcuts as keys
from workbench.ui.bridge import EngineBridge, LoadedModel
from workbench.ui.chat.controller import ChatController, ChatWidgets
from workbench.ui.chat.qt_chat_keys import ChatKeys
from workbench.ui.chat.qt_chat_view import QtChatView
from workbench.ui.chat.qt_composer import QtComposer
from workbench.ui.chat.qt_conversation_header import (
    QtConversationHeader,
    QtConversationSettingsDialog,
)
from workbench.ui.conversations.qt_controller import ConversationsController
from workbench.ui.conversations.qt_conversation_list import QtConversationList
from workbench.ui.db_worker import AsyncStore
from workbench.ui.models.qt_model_picker import QtModelPicker
from workbench.ui.models.recent import recent_file
from workbench.ui.qt_notice_bar import QtNoticeBar
from workbench.ui.qt_server_switch import QtServerSwitch
from workbench.ui.qt_status_bar import QtStatusBar
from workbench.ui.qt_theme import apply_theme, plot_colours
from workbench.ui.qt_window_memory import RememberedWindow
from workbench.ui.runs.qt_matrix_dialog import QtMatrixDialog
from workbench.ui.runs.qt_runs_page import QtRunsPage
from workbench.ui.session_controller import SessionController
from workbench.ui.session_view import SessionView
from workbench.ui.settings.qt_settings_page import QtSettingsPage
from workbench.ui.stalls.qt_stall_hook import StallExplainer
from workbench.ui.store_banner import StoreBanner
from workbench.ui.store_salvage import StoreSalvage
from workbench.ui.tasks import Tasks
from workbench.ui.telemetry.qt_cache_sizing import QtCacheSizing
from workbench.ui.telemetry.qt_expert_map import QtExpertMap
from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel
from workbench.ui.ui_collector import TICK_MS as COLLECT_TICK_MS
from workbench.ui.ui_collector import shared_collector
from workbench.ui.window_memory import THEMES, WindowMemory, startup_config

log = logging.getLogger("workbench.ui")
SHUTDOWN_GRACE_S = 10.0
CHAT_MIN_WIDTH = 300  # px: a message line still holds a few words
# px: the chat column a resize keeps where it can; the docks on the right and the conversation
# list give way for it (issue 39: at 1024x700 the chat was 250 px wide beside the telemetry).
CHAT_READABLE_WIDTH = 480
LIST_NARROWEST = 160  # px: the conversation list still shows the start of a title
LIST_UNFOLDED = 200  # px: the list's width when a wider window brings it back
DEFAULT_SIZE = QSize(1440, 900)  # on a smaller screen: the screen's free area (_initial_size)
_DOCK_FEATURES = (QDockWidget.DockWidgetFeature.DockWidgetMovable
                  | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                  | QDockWidget.DockWidgetFeature.DockWidgetClosable)


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
        self.bridge, self.db = bridge, db
        self.data = data or paths.data_dir()  # conversations, recent models, bench runs
        # Cycles are collected here, on the UI thread, never on the engine's or the database's
        # (ui_collector.py: a collection there destroyed Qt objects and deadlocked the window).
        shared_collector().install()
        self._collect_timer = QTimer()  # no parent: shutdown() may run after the C++ window is gone
        self._collect_timer.timeout.connect(shared_collector().tick)
        self._collect_timer.start(COLLECT_TICK_MS)
        self.tasks = Tasks(on_error=self._background_error)
        self.closed = asyncio.Event()
        # The one owner of the settings in force and of the model (session_controller.py).
        self.session = SessionController(bridge, db.call, config, self.data, self.tasks.spawn)

        self.conversation_list = QtConversationList()
        self.chat_view = QtChatView()
        self.notice = QtNoticeBar()
        # The conversation database's own bar: it stays while the window runs on a temporary
        # store (a model loading, which clears the notice bar's errors, leaves it alone).
        self.store_banner = QtNoticeBar()
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
        self.chat_column = centre
        self._list_folded = False  # folded away by make_room_for_chat, not by the user
        self._room_timer = QTimer(self)
        self._room_timer.setSingleShot(True)
        self._room_timer.setInterval(0)
        self._room_timer.timeout.connect(self.make_room_for_chat)
        splitter = QSplitter()
        self.splitter = splitter
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

        # The chat listens to the session first: a model's widgets are ready before the pages.
        self.chat = ChatController(
            self.session, db,
            ChatWidgets(self.chat_view, self.composer, self.telemetry, self.status,
                        self.expert_map),
            on_conversations_changed=lambda: self.tasks.spawn(
                self.conversations.refresh(), name="refresh-list"),
            on_turn_finished=self._turn_finished, show_error=self.notice.show_error,
            show_info=self.notice.show_info,
        )
        self.session.listen(SessionView(self.status, self.notice, self.composer,
                                        self.settings_page, self.runs_page,
                                        self.conversation_header, self.cache_sizing))
        self.conversations = ConversationsController(
            db, self.conversation_list, self.notice, self._open_conversation,
            lambda: self.chat.conversation_id, self.tasks.spawn, self,
            busy=lambda: self.chat.generating,
            forget_state=lambda cid: bridge.forget_conversation(str(cid)),
        )
        # The store banner's buttons are the salvage's (read when the banner shows them).
        self.banner = StoreBanner(self.store_banner, db, self.setWindowTitle,
                                  lambda: self.salvage.actions(self.tasks.spawn))
        self.salvage = StoreSalvage(db, self.banner, self.notice, self.status,
                                    lambda: self.chat.generating, self._reload_store)
        # Slow tokens under each answer and on the plots (ui/stalls/); it only listens.
        self.stalls = StallExplainer(self.chat_view, self.telemetry, db, self.tasks.spawn)
        # What the last window on this data directory left (window_memory.py): its layout and
        # theme now, its conversation and model once start() runs.
        self.remembered = RememberedWindow(self, self.data, self.tasks.spawn,
                                           lambda: self.chat.conversation_id,
                                           lambda: self.theme)
        self.session.listen(self.remembered)
        self.chat_keys = ChatKeys(self.chat, self.chat_view, self.composer, self.conversations,
                                  self.conversation_list, self.tasks.spawn)
        self._connect()
        self._build_menus()
        self.setAcceptDrops(True)
        self.chat.model_changed(None)
        self.set_theme(self.memory.theme)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._scheme_changed)
        self.remembered.restore_layout()

    # ---- the session's, asked ---------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The settings in force (the session controller's)."""
        return self.session.config

    @property
    def global_config(self) -> Config:
        """The Settings dock's settings: a new conversation starts from them."""
        return self.session.global_config

    @property
    def loading(self) -> bool:
        return self.session.loading

    @property
    def memory(self) -> WindowMemory:
        return self.remembered.memory

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
        self.chat_view.edit_closed.connect(self.chat_keys.focus_composer)
        self.chat_view.version_requested.connect(
            lambda mid: spawn(self.chat.switch_version(mid), name="open-conversation"))
        self.chat_view.token_clicked.connect(self.telemetry.highlight)
        self.chat_view.token_hovered.connect(self.telemetry.show_token)
        self.telemetry.span_selected.connect(self.chat_view.mark_span)
        self.telemetry.headline_updated.connect(self._live_rate)
        self.status.cancel_load_requested.connect(self.bridge.cancel_open)
        self.settings_page.applied.connect(
            lambda config, reopen: spawn(self.apply_settings(config, reopen)))
        self.settings_page.rerun_with.connect(lambda config: spawn(self.chat.rerun_with(config)))
        self.conversation_header.edit_requested.connect(
            lambda: spawn(self.edit_conversation_settings(), name="conversation-settings"))
        stop = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        stop.setContext(Qt.ShortcutContext.WindowShortcut)
        stop.activated.connect(self.chat.stop)
        self._stop_shortcut = stop

    def _build_menus(self) -> None:
        spawn = self.tasks.spawn
        file_menu = self.menuBar().addMenu("&File")
        self._action(file_menu, "&Open model…", keys.OPEN_MODEL.key,
                     lambda: spawn(self.pick_model(), name="pick-model"))
        self._action(file_menu, "&Import conversation…", "",
                     lambda: spawn(self.conversations.import_dialog()))
        self._action(file_menu, "Export conversation as &Markdown…", "", lambda: self._export("md"))
        self._action(file_menu, "Export conversation as &JSON…", "", lambda: self._export("json"))
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", keys.QUIT.key, self.close)
        chat_menu = self.menuBar().addMenu("&Chat")
        ck = self.chat_keys
        self._action(chat_menu, "&New conversation", keys.NEW_CHAT.key, ck.new_chat)
        self._action(chat_menu, "&Message box", keys.FOCUS_COMPOSER.key, ck.focus_composer)
        self._action(chat_menu, "&Edit last message", keys.EDIT_LAST.key, ck.edit_last)
        self._action(chat_menu, "&Regenerate last answer", keys.REGENERATE.key,
                     ck.regenerate_last)
        self._action(chat_menu, "C&ontinue last answer", keys.CONTINUE.key, ck.continue_last)
        self._action(chat_menu, "Ne&xt conversation", keys.NEXT_CHAT.key,
                     lambda: ck.step_conversation(1))
        self._action(chat_menu, "&Previous conversation", keys.PREVIOUS_CHAT.key,
                     lambda: ck.step_conversation(-1))
        chat_menu.addSeparator()
        self._action(chat_menu, "&Copy chat", keys.COPY_CHAT.key, self.copy_chat)
        self._action(chat_menu, "&Stop answer", "", self.chat.stop)
        view_menu = self.menuBar().addMenu("&View")
        view_menu.addAction(self.telemetry_dock.toggleViewAction())
        view_menu.addAction(self.expert_dock.toggleViewAction())
        view_menu.addAction(self.cache_dock.toggleViewAction())
        # "Show", not a toggle: a dock behind another tab is open but unseen, and a toggle
        # would close it instead of bringing it to the front.
        self._action(view_menu, "&Settings", keys.SETTINGS.key,
                     lambda: self.show_dock(self.settings_dock))
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
        self.server_switch = QtServerSwitch(self.bridge, self.telemetry, self.status, self,
                                            db=self.db)
        tools_menu.addAction(self.server_switch.action)
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", keys.HELP.key, self.show_shortcuts)

    def show_shortcuts(self) -> QMessageBox:
        """Help > Keyboard shortcuts: the list `ui/shortcuts.py` declares (not modal)."""
        box = QMessageBox(QMessageBox.Icon.NoIcon, "Keyboard shortcuts", "", parent=self)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setText(keys.help_text())
        box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        self.shortcuts_box = box
        return box

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
        self.banner.show_state()
        self.chat_keys.focus_composer()  # typing at once goes to the message box
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

    # ---- the theme -------------------------------------------------------------------------

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

    # ---- models and settings: the session controller's ------------------------------------------

    async def pick_model(self, preselect: str | None = None) -> None:
        picker = QtModelPicker(self.config, self, preselect=preselect,
                               recent=recent_file(self.data), data=self.data,
                               opening=self.session.opening_settings)
        config = await picker.choose()
        threads_chosen = picker.threads_chosen
        picker.deleteLater()
        if config is not None:
            await self.load_model(config, threads_chosen=threads_chosen)

    async def load_model(self, config: Config, reopening: bool = False,
                         threads_chosen: bool | None = None) -> LoadedModel | None:
        """File > Open model (and start-up): see SessionController.open."""
        return await self.session.open(config, reopening, threads_chosen)

    async def apply_settings(self, config: Config, reopen: bool) -> bool:
        """The settings dock's Apply: see SessionController.apply."""
        return await self.session.apply(config, reopen)

    async def edit_conversation_settings(self) -> bool:
        """The header's dialog: this conversation's system prompt and sampling settings."""
        dialog = QtConversationSettingsDialog(self.config, self)
        chosen = await dialog.choose()
        dialog.deleteLater()
        if chosen is None:
            return False
        return await self.session.apply_conversation_settings(chosen)

    # ---- the conversation database ------------------------------------------------------------

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

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._room_timer.start()  # once the layout has placed the chat at the new size

    def make_room_for_chat(self) -> None:
        """Narrow the dock in front on the right, then the conversation list, until the chat
        column is CHAT_READABLE_WIDTH wide; where the list would have to be narrower than
        LIST_NARROWEST it folds away (as chat apps fold their sidebar; the splitter's handle
        and Ctrl+PgUp/PgDown still reach it), and it comes back when the window is wide
        again. A wide window keeps the widths the user chose."""
        short = CHAT_READABLE_WIDTH - self.chat_column.width()
        sizes = self.splitter.sizes()
        if short < 0 and self._list_folded and len(sizes) == 2:
            if -short >= LIST_UNFOLDED:
                self.splitter.setSizes([LIST_UNFOLDED, sizes[1] - LIST_UNFOLDED])
                self._list_folded = False
            return
        if short <= 0:
            return
        right = Qt.DockWidgetArea.RightDockWidgetArea
        docks = [d for d in self.findChildren(QDockWidget) if d.isVisible()
                 and not d.isFloating() and self.dockWidgetArea(d) == right
                 and not d.visibleRegion().isEmpty()]
        if docks:
            dock = max(docks, key=lambda d: d.width())
            width = max(dock.minimumSizeHint().width(), dock.width() - short)
            if width < dock.width():
                self.resizeDocks([dock], [width], Qt.Orientation.Horizontal)
                short -= dock.width() - width
        if short <= 0 or len(sizes) != 2 or sizes[0] == 0:
            return
        give = sizes[0] if sizes[0] - short < LIST_NARROWEST else short
        self.splitter.setSizes([sizes[0] - give, sizes[1] + give])
        self._list_folded = sizes[0] == give

    def closeEvent(self, event: QCloseEvent) -> None:
        self.remembered.take()
        self.closed.set()
        self.closing.emit()
        super().closeEvent(event)

    async def shutdown(self) -> None:
        """Stop any answer, let the final save land, free the model, close the database."""
        self.bridge.cancel()
        self.bridge.cancel_open()
        await self.server_switch.stop()  # its admitted requests finish on the engine first
        await self.chat.cancel_title()
        await self.chat.close()
        self.settings_page.pricer.close()  # a Price it stops at its next position
        await self.remembered.save(self.remembered.take())
        # The window's own first: the stopped answer's final save is one of its tasks, and a
        # finished turn spawns a runs refresh on the runs page. All of them use the database.
        for tasks in (self.tasks, self.settings_page.tasks, self.runs_page.tasks):
            try:
                await asyncio.wait_for(tasks.wait_idle(), SHUTDOWN_GRACE_S)
            except TimeoutError:
                tasks.cancel_all()
        await self.session.close()
        await self.db.close()
        self._collect_timer.stop()
        gc.collect()  # this window's cycles, on this thread, before automatic collection resumes
        shared_collector().uninstall()
