"""Wires the stall explainer into the window: when an answer's tokens are shown (a stored one
opened, a streamed one finished), its rows are read and explained on the database worker,
and the answer gets its short list, the plots their markers. A click on a listed token goes
the way a click in the Tokens view goes (the answer's token_clicked: every plot marks it), and
the token is marked in the answer's token view too.

Kept apart from the window and the chat controller: they only say when tokens are shown
(QtChatView.tokens_shown) and when the plots are cleared (QtTelemetryPanel.cleared).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject

from workbench.ui.chat.qt_chat_view import QtChatView
from workbench.ui.chat.qt_message_widget import QtMessageWidget
from workbench.ui.db_worker import AsyncStore
from workbench.ui.stalls.answer_stalls import AnswerStalls, answer_stalls
from workbench.ui.stalls.qt_stall_list import QtStallList
from workbench.ui.stalls.qt_stall_markers import StallMarkers
from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel

Spawn = Callable[..., Any]


class StallExplainer(QObject):
    def __init__(self, chat_view: QtChatView, telemetry: QtTelemetryPanel, db: AsyncStore,
                 spawn: Spawn) -> None:
        super().__init__(chat_view)
        self.chat_view, self.telemetry, self.db, self._spawn = chat_view, telemetry, db, spawn
        self.markers = StallMarkers(telemetry)
        self.explained = 0  # answers explained (tests wait on it)
        chat_view.tokens_shown.connect(self._tokens_shown)
        telemetry.cleared.connect(self.markers.clear)

    def _tokens_shown(self, widget: QtMessageWidget) -> None:
        self._spawn(self.refresh(widget), name=f"stalls-{widget.shown.id}")

    async def refresh(self, widget: QtMessageWidget) -> None:
        mid, x0, n = widget.shown.id, widget.token_x0, len(widget.token_pieces)
        if x0 < 0:
            return
        result = await self.db.call(lambda store: answer_stalls(store, mid))
        if not (shiboken6.isValid(widget) and self.chat_view.widget_for(mid) is widget
                and widget.token_x0 == x0):
            return  # the conversation changed meanwhile: its own refresh follows
        self._show(widget, result, x0, n)
        self.explained += 1

    def _show(self, widget: QtMessageWidget, result: AnswerStalls | None, x0: int,
              n: int) -> None:
        listing = widget.findChild(QtStallList)
        if listing is None:
            listing = QtStallList()
            listing.token_clicked.connect(lambda i, w=widget: self._select(w, i))
            widget.add_section(listing)
        mid = widget.shown.id
        if result is None or result.n_rows != n:  # rows and shown tokens disagree: no x map
            listing.setVisible(False)
            self.markers.remove(mid)
            return
        listing.show_explanation(result.explanation, x0)
        # Only the listed tokens are marked: every slow one buried the lines (issue 39).
        self.markers.show(mid, [x0 + i for i in listing.indices])

    def _select(self, widget: QtMessageWidget, index: int) -> None:
        x = widget.token_x0 + index
        widget.mark_tokens(x, x)
        widget.token_clicked.emit(x)

