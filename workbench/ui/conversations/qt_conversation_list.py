"""The conversation list on the left: new, search, open, rename, delete, export, import.

The list only shows and asks; the window's coroutines do the database work and call
`set_conversations` / `set_search_results` with what they found.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

SEARCH_DELAY_MS = 250  # search once the user pauses typing, not per key


class QtConversationList(QWidget):
    open_requested = Signal(int)
    new_requested = Signal()
    search_requested = Signal(str)  # "" clears the search
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    export_requested = Signal(int, str)  # conversation id, "md" or "json"
    import_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.new_button = QPushButton("New chat")
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        self.import_button = QPushButton("Import…")
        self.import_button.setToolTip("Import a conversation exported as JSON")
        self.import_button.clicked.connect(self.import_requested)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search conversations")
        self.search.setClearButtonEnabled(True)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(
            lambda: self.search_requested.emit(self.search.text().strip()))
        self.search.textChanged.connect(lambda _: self._search_timer.start())
        self.list = QListWidget()
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.itemActivated.connect(self._activated)
        self.list.itemClicked.connect(self._activated)
        self.list.itemChanged.connect(self._renamed)
        buttons = QHBoxLayout()
        buttons.addWidget(self.new_button)
        buttons.addWidget(self.import_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(buttons)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self._filling = False
        self.current_id: int | None = None

    # ---- content ------------------------------------------------------------------------------

    def set_conversations(self, conversations: list[Any]) -> None:
        self._fill([(c.id, c.title or "Untitled", "") for c in conversations])

    def set_search_results(self, hits: list[Any]) -> None:
        self._fill([(h.conversation.id, h.conversation.title or "Untitled", h.snippet)
                    for h in hits])

    def _fill(self, rows: list[tuple[int, str, str]]) -> None:
        self._filling = True
        self.list.clear()
        seen: set[int] = set()
        for cid, title, snippet in rows:
            if cid in seen:
                continue
            seen.add(cid)
            item = QListWidgetItem(title if not snippet else f"{title}\n  {snippet}")
            item.setData(Qt.ItemDataRole.UserRole, cid)
            item.setData(Qt.ItemDataRole.UserRole + 1, title)
            item.setToolTip(snippet or title)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
            self.list.addItem(item)
            if cid == self.current_id:
                item.setSelected(True)
        self._filling = False

    def ids(self) -> list[int]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]

    def item_for(self, conversation_id: int) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == conversation_id:
                return item
        return None

    def set_current(self, conversation_id: int | None) -> None:
        self.current_id = conversation_id
        self.list.clearSelection()
        item = self.item_for(conversation_id) if conversation_id is not None else None
        if item is not None:
            item.setSelected(True)

    # ---- user actions -------------------------------------------------------------------------

    def _activated(self, item: QListWidgetItem) -> None:
        cid = item.data(Qt.ItemDataRole.UserRole)
        if cid != self.current_id:
            self.open_requested.emit(cid)

    def _renamed(self, item: QListWidgetItem) -> None:
        if self._filling:
            return
        title = item.text().split("\n")[0].strip()
        if title and title != item.data(Qt.ItemDataRole.UserRole + 1):
            self.rename_requested.emit(item.data(Qt.ItemDataRole.UserRole), title)

    def _menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        cid = item.data(Qt.ItemDataRole.UserRole)
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.list.editItem(item))
        menu.addAction("Export as Markdown…", lambda: self.export_requested.emit(cid, "md"))
        menu.addAction("Export as JSON (whole tree)…",
                       lambda: self.export_requested.emit(cid, "json"))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self.delete_requested.emit(cid))
        menu.popup(self.list.viewport().mapToGlobal(pos))
