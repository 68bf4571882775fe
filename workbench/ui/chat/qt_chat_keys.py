"""The chat from the keyboard: what each shortcut of `ui/shortcuts.py` does that no widget does
by itself (issue 39: the message box never had the focus, Ctrl+N left it nowhere, and edit,
regenerate, continue and switching conversations needed the mouse).

Each action acts on the chat as shown (the last question, the last answer, the list's order)
and does nothing while an answer streams, as the buttons it stands for are disabled then.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from PySide6.QtCore import Qt

from workbench.ui.chat.controller import ChatController
from workbench.ui.chat.qt_chat_view import QtChatView
from workbench.ui.chat.qt_composer import QtComposer
from workbench.ui.chat.qt_message_widget import QtMessageWidget, can_continue
from workbench.ui.conversations.qt_controller import ConversationsController
from workbench.ui.conversations.qt_conversation_list import QtConversationList

Spawn = Callable[..., Any]


class ChatKeys:
    def __init__(self, chat: ChatController, view: QtChatView, composer: QtComposer,
                 conversations: ConversationsController, listing: QtConversationList,
                 spawn: Spawn) -> None:
        self.chat, self.view, self.composer = chat, view, composer
        self.conversations, self.listing, self._spawn = conversations, listing, spawn

    def focus_composer(self) -> None:
        self.composer.prompt.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def new_chat(self) -> None:
        self._spawn(self._then_focus(self.conversations.open(None)), name="open-conversation")

    async def _then_focus(self, opening: Coroutine[Any, Any, None]) -> None:
        await opening
        self.focus_composer()  # typing goes to the new chat, never to a menu

    def _last(self, role: str) -> QtMessageWidget | None:
        shown = [w for w in self.view.messages if w.shown.role == role]
        return shown[-1] if shown else None

    def edit_last(self) -> None:
        widget = self._last("user")
        if widget is not None and not self.chat.generating:
            widget.start_edit()  # the editor takes the focus; Enter sends, Esc cancels

    def regenerate_last(self) -> None:
        answer = self.chat.last_answer_id
        if answer is not None and not self.chat.generating:
            self._spawn(self.chat.regenerate(answer))

    def continue_last(self) -> None:
        widget = self._last("assistant")
        if widget is not None and not self.chat.generating and can_continue(widget.shown):
            self._spawn(self.chat.continue_answer(widget.shown.id))

    def step_conversation(self, step: int) -> None:
        """The next (+1) or previous (-1) conversation in the list, as a click there opens it."""
        ids = self.listing.ids()
        if not ids or self.chat.generating:
            return
        current = self.chat.conversation_id
        at = ids.index(current) + step if current in ids else (0 if step > 0 else len(ids) - 1)
        if 0 <= at < len(ids):
            self._spawn(self.conversations.open(ids[at]), name="open-conversation")
