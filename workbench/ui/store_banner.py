"""The conversation database's banner above the composer, and the window title that goes with
it: a window on a temporary store (a damaged, newer, read-only or full file) says so for as long
as it lasts (no close button), and a fault while in use says what was not saved.

The texts are `store_notices.py`'s; the buttons' work (Salvage, Move aside, Try again) is
`store_salvage.py`'s. Qt-free itself: it drives a QtNoticeBar it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.store import StoreFault
from workbench.ui import store_notices

TITLE = "Workbench"
TEMPORARY_TITLE = "Workbench (temporary store: nothing is saved)"


class StoreBanner:
    def __init__(self, bar: Any, db: Any, set_title: Callable[[str], None],
                 actions: Callable[[], dict[str, Callable[[], None]]]) -> None:
        """`bar`: the QtNoticeBar; `db`: the AsyncStore; `actions()`: a callback for each of
        store_notices' button labels."""
        self.bar, self.db, self._set_title, self._actions = bar, db, set_title, actions
        self._state: tuple[str, list[str], bool] | None = None
        db.on_fault = self.fault

    def show_state(self) -> None:
        """The banner for a window on a temporary store, and a title that says so."""
        fault = self.db.fault
        if fault is None or not self.db.temporary:
            self._set_title(TITLE)
            return
        text, labels = store_notices.at_open(fault, self.db.copied_conversations)
        self.show(text, labels, closable=False)
        self._set_title(TEMPORARY_TITLE)

    def show(self, text: str, labels: list[str], closable: bool) -> None:
        self._state = (text, labels, closable)
        actions = self._actions()
        pairs = [(label, actions[label]) for label in labels]
        label, callback = pairs[0] if pairs else ("", None)
        self.bar.show_error(text, label, callback, more=pairs[1:], closable=closable)

    def restore(self) -> None:
        """The banner as it was (a button's work did not happen)."""
        if self._state is not None:
            self.show(*self._state)

    def resolved(self) -> None:
        """The real file is in use again: the title is plain (the banner then says how)."""
        self._state = None
        self._set_title(TITLE)

    def fault(self, fault: StoreFault) -> None:
        """A database call failed because of the file or its place (a disk that filled up)."""
        if self.db.temporary:
            return  # the banner already says nothing is saved
        self.show(*store_notices.in_use(fault), closable=True)
