"""The store banner's buttons: Salvage and Move aside (a damaged file is renamed, kept, and a
new one takes its place), Try again (the real file, with what the temporary store gained).

The work runs on the database worker; this says what happened, on the banner and the notice
bar, and then has everything shown from the database read again (its ids changed with the
file). Qt-free: it drives widgets it is given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from workbench.store import StoreFault
from workbench.ui import store_notices
from workbench.ui.db_worker import StoreInUse
from workbench.ui.store_banner import StoreBanner


class StoreSalvage:
    def __init__(self, db: Any, banner: StoreBanner, notice: Any, status: Any,
                 answering: Callable[[], bool], reload: Callable[[], Awaitable[None]]) -> None:
        self.db, self.banner, self.notice, self.status = db, banner, notice, status
        self._answering, self._reload = answering, reload

    def actions(self, spawn: Callable[..., Any]) -> dict[str, Callable[[], None]]:
        """A callback for each of the banner's button labels."""
        return {
            store_notices.SALVAGE: lambda: spawn(self.start_fresh(True), name="store"),
            store_notices.START_FRESH: lambda: spawn(self.start_fresh(False), name="store"),
            store_notices.TRY_AGAIN: lambda: spawn(self.retry(), name="store"),
        }

    async def start_fresh(self, salvaging: bool) -> bool:
        """Salvage / Move aside: the damaged file is renamed (kept), a new one takes its place,
        and what can be read of the old one (with `salvaging`) and what was written in the
        temporary store meanwhile are copied in, on the database worker."""
        if self._answering():
            self.banner.restore()
            self.notice.show_error("Stop the answer first, then move the damaged database aside.")
            return False
        self.status.showMessage("Salvaging the damaged database…" if salvaging
                                else "Moving the damaged database aside…")
        try:
            done = await self.db.start_fresh(salvaging)
        except StoreInUse as exc:
            self.banner.restore()
            self.notice.show_error(f"Another workbench window has this database open ({exc}). "
                                   "Close it, then try again.")
            return False
        except StoreFault as fault:  # the new file cannot be made here either
            self.banner.show_state()
            self.notice.show_error(f"Could not start a new database: {fault.detail}.")
            return False
        except OSError as exc:
            self.banner.restore()
            self.notice.show_error(f"Could not move the damaged database aside: "
                                   f"{exc.strerror or exc}. It is unchanged; make its folder "
                                   "writable, then try again.")
            return False
        finally:
            self.status.clearMessage()
        self.banner.resolved()
        await self._reload()
        self.banner.bar.show_info(store_notices.rebuilt(done.aside, done.salvaged, done.merged))
        return True

    async def retry(self) -> bool:
        """Try again: the real file, with what the temporary store gained."""
        if self._answering():
            self.banner.restore()
            self.notice.show_error("Stop the answer first, then try the database again.")
            return False
        try:
            merged = await self.db.retry()
        except StoreFault:
            self.banner.show_state()  # the fault that still stands, said again
            self.notice.show_error("The conversation database still cannot be used; see "
                                   "the message above.")
            return False
        self.banner.resolved()
        assert self.db.path is not None
        await self._reload()
        self.banner.bar.show_info(store_notices.retried(self.db.path, merged))
        return True
