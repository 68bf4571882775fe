"""Conversation-list behaviour as coroutines: list, search, rename, delete with undo, export,
import. File dialogs run through qasync.asyncWrap (never a nested .exec() in a coroutine) and
file reads and writes run off the UI thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget
from qasync import asyncWrap

from workbench.atomic_write import write_text_atomic
from workbench.store import Imported
from workbench.ui.conversations.qt_conversation_list import QtConversationList
from workbench.ui.db_worker import AsyncStore
from workbench.ui.qt_notice_bar import QtNoticeBar

_FILTERS = {"md": "Markdown (*.md)", "json": "Conversation JSON (*.json)"}
# The chat keeps the conversation whose answer is streaming on screen (it refuses to switch
# while one is written); the list must not pretend otherwise, and the user hears why.
BUSY_NOTE = ("An answer is being written in this conversation, so it stays open. Stop the "
             "answer (Esc) or let it finish, then open the other conversation.")


class ConversationsController:
    def __init__(
        self, db: AsyncStore, view: QtConversationList, notice: QtNoticeBar,
        open_conversation: Callable[[int | None], Awaitable[None]],
        current: Callable[[], int | None], spawn: Callable[..., object], parent: QWidget,
        busy: Callable[[], bool] = lambda: False,
        forget_state: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        """`forget_state(id)` drops a deleted conversation's kept KV state (memory and disk)."""
        self.db, self.view, self.notice = db, view, notice
        self._busy = busy  # an answer is streaming: the chat will not switch conversations
        self._forget_state = forget_state
        self._open = open_conversation
        self._current = current
        self._spawn = spawn
        self._parent = parent
        self.query = ""
        view.open_requested.connect(lambda cid: spawn(self.open(cid), name="open-conversation"))
        view.new_requested.connect(lambda: spawn(self.open(None), name="open-conversation"))
        view.search_requested.connect(lambda text: spawn(self.search(text), name="search"))
        view.rename_requested.connect(lambda cid, t: spawn(self.rename(cid, t)))
        view.delete_requested.connect(lambda cid: spawn(self.delete(cid)))
        view.export_requested.connect(lambda cid, fmt: spawn(self.export_dialog(cid, fmt)))
        view.import_requested.connect(lambda: spawn(self.import_dialog()))

    async def refresh(self) -> None:
        if self.query:
            await self.search(self.query)
            return
        conversations = await self.db.call(lambda s: s.list_conversations())
        self.view.set_conversations(conversations)
        self.view.set_current(self._current())

    async def search(self, text: str) -> None:
        self.query = text
        if not text:
            conversations = await self.db.call(lambda s: s.list_conversations())
            self.view.set_conversations(conversations)
        else:
            hits = await self.db.call(lambda s: s.search(text))
            self.view.set_search_results(hits)
        self.view.set_current(self._current())

    async def open(self, conversation_id: int | None) -> None:
        await self._open(conversation_id)
        opened = self._current()
        self.view.set_current(opened)  # the list shows the conversation the chat shows
        if opened != conversation_id and self._busy():
            self.notice.show_info(BUSY_NOTE)

    async def rename(self, conversation_id: int, title: str) -> None:
        await self.db.call(lambda s: s.rename_conversation(conversation_id, title))
        await self.refresh()

    async def delete(self, conversation_id: int) -> None:
        conv = await self.db.call(lambda s: s.get_conversation(conversation_id))
        await self.db.call(lambda s: s.delete_conversation(conversation_id))
        if self._current() == conversation_id:
            await self.open(None)
        if self._forget_state is not None:
            # Its model state is not kept for an undo: restoring the conversation brings its
            # messages back, and its next turn reads them again.
            await self._forget_state(conversation_id)
        await self.refresh()
        self.notice.show_info(f"Deleted “{conv.title or 'Untitled'}”.", "Undo",
                              lambda: self._spawn(self.undo_delete(conversation_id)))

    async def undo_delete(self, conversation_id: int) -> None:
        await self.db.call(lambda s: s.undo_delete(conversation_id))
        await self.refresh()

    # ---- files --------------------------------------------------------------------------------

    async def export_to(self, conversation_id: int, fmt: str, path: Path) -> None:
        if fmt == "md":
            text = await self.db.call(lambda s: s.export_markdown(conversation_id))
        else:
            text = await self.db.call(lambda s: s.export_json(conversation_id))
        # Whole or not at all: a full disk keeps an earlier export of that name intact.
        await asyncio.get_running_loop().run_in_executor(None, write_text_atomic, path, text)

    async def import_from(self, path: Path) -> Imported:
        text = await asyncio.get_running_loop().run_in_executor(None, path.read_text, "utf-8")
        imported = await self.db.call(lambda s: s.import_document(text))
        await self.refresh()
        return imported

    async def export_dialog(self, conversation_id: int, fmt: str) -> None:
        conv = await self.db.call(lambda s: s.get_conversation(conversation_id))
        suggested = f"{_safe_name(conv.title or 'conversation')}.{fmt}"
        path, _ = await asyncWrap(lambda: QFileDialog.getSaveFileName(
            self._parent, "Export conversation", suggested, _FILTERS[fmt]))
        if not path:
            return
        try:
            await self.export_to(conversation_id, fmt, Path(path))
        except OSError as exc:  # OutputFileError: says what happened and what to do
            self.notice.show_error(f"The conversation was not exported: {exc}")
            return
        self.notice.show_info(f"Exported to {path}.")

    async def import_dialog(self) -> None:
        path, _ = await asyncWrap(lambda: QFileDialog.getOpenFileName(
            self._parent, "Import conversation", "", _FILTERS["json"]))
        if not path:
            return
        try:
            imported = await self.import_from(Path(path))
        except (OSError, ValueError, KeyError) as exc:
            self.notice.show_error(f"Could not import {Path(path).name}: {exc}. Pick a JSON file "
                                   "exported by the workbench.")
            return
        await self.open(imported.conversation.id)
        if imported.left_out:
            self.notice.show_info(
                f"Imported {Path(path).name}, but left out conversation settings that are not "
                f"valid ({'; '.join(imported.left_out)}); the global settings apply there.")


def _safe_name(title: str) -> str:
    keep = "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip()
    return keep[:60] or "conversation"
