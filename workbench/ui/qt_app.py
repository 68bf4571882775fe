"""Starting the window: one QApplication, one qasync loop, one engine thread, one database worker.

`run_window` is what `python -m workbench` calls. The qasync loop is the UI's only loop; the
window's lifetime is one coroutine (`main`) that ends when the window closes, after the
engine has freed the model on its own thread and the database has been closed.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from PySide6.QtWidgets import QApplication

from workbench import paths
from workbench.config import Config
from workbench.store.store import DB_NAME
from workbench.ui.bridge import EngineBridge
from workbench.ui.db_worker import AsyncStore
from workbench.ui.qt_main_window import QtMainWindow

Script = Callable[[QtMainWindow], Awaitable[int]]


def application() -> QApplication:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("workbench")
    # The window's coroutine decides when to end (after the engine and database closed).
    app.setQuitOnLastWindowClosed(False)
    return app  # type: ignore[return-value]


async def open_window(config: Config, data: Path | None = None) -> QtMainWindow:
    """A window over a fresh engine thread and the conversation database (not yet shown).

    `data` is the data directory (conversations, recent models, bench runs); the user's own
    when None."""
    data = data or paths.data_dir()
    db = await AsyncStore.open(data / DB_NAME)
    return QtMainWindow(EngineBridge(kv_dir=data / "kv"), db, config, data=data)


async def main(config: Config, sends: Sequence[str] = (), quit_after: bool = False,
               script: Script | None = None, show: bool = True, data: Path | None = None,
               explicit: frozenset[str] = frozenset()) -> int:
    window = await open_window(config, data)
    window.session.threads_chosen = "n_threads" in explicit
    if show:
        window.show()
    code = 0
    try:
        await window.start()
        # The hundred thousand objects of the modules, Qt wrappers and plots built so far live
        # as long as the window: out of the collector's sight, a full collection no longer
        # walks them all and stalls the event loop for ~100 ms while an answer streams.
        gc.freeze()
        if not await send_all(window, sends):
            code = 1
        if script is not None:
            code = await script(window)
        if quit_after or script is not None:
            window.close()
        await window.closed.wait()
    finally:
        await window.shutdown()
        window.deleteLater()
    return code


async def send_all(window: QtMainWindow, sends: Sequence[str]) -> bool:
    """The command line's --send messages, in order; False when they could not be sent.

    With no model loaded (it failed to load: the notice bar says why) nothing is sent. That is
    said on stderr, with every message, and the messages wait in the composer for a model to
    be opened: the command exits non-zero instead of dropping them silently.
    """
    if not sends:
        return True
    if window.chat.model is None:
        notice = window.notice
        why = notice.label.text() if notice.kind == "error" else "no model is loaded"
        print(f"error: {why}", file=sys.stderr)
        print(f"error: {len(sends)} message(s) from --send were not sent:", file=sys.stderr)
        for text in sends:
            print(f"  {text}", file=sys.stderr)
        if not window.composer.prompt.toPlainText().strip():
            window.composer.prompt.setPlainText("\n\n".join(sends))
        return False
    for text in sends:
        await window.chat.send(text)
    return True


def run_window(config: Config, sends: Sequence[str] = (), quit_after: bool = False,
               script: Script | None = None, show: bool = True, data: Path | None = None,
               explicit: frozenset[str] = frozenset()) -> int:
    """Open the window and run until it closes; returns the exit code. `explicit`: the
    settings of `config` the user chose (engine/opening.py: a chosen thread count is kept)."""
    import qasync

    from workbench.ui.qt_check import binding_problem

    application()
    problem = binding_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    return qasync.run(main(config, sends, quit_after, script, show, data, explicit))
