"""The Store: one SQLite file holding conversations, runs and presets.

Threading: every method is synchronous and short, meant to run on the window's database worker
thread. A Store may be opened on one thread and used on another (check_same_thread is off),
but it must be used from ONE thread at a time; give each thread its own Store if two need it.
Several Stores (or processes) may open the same file; WAL lets readers run beside one writer.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from types import TracebackType

from workbench import paths
from workbench.store.conversations import ConversationOps
from workbench.store.export import ExportOps
from workbench.store.messages import MessageOps
from workbench.store.presets import PresetOps
from workbench.store.runs import RunOps
from workbench.store.schema import connect, migrate
from workbench.store.search import SearchOps, ensure_index

DB_NAME = "workbench.db"


def default_path() -> Path:
    return paths.data_dir() / DB_NAME


class Store(ConversationOps, MessageOps, SearchOps, RunOps, PresetOps, ExportOps):
    """Open with Store.open(path); every method commits before returning."""

    def __init__(self, conn: sqlite3.Connection, path: Path, fts: bool) -> None:
        self._db = conn
        self._fts = fts
        self.path = path
        self.recovered_on_open = 0  # answers marked "interrupted" by open(recover=True)

    @classmethod
    def open(cls, path: Path | str | None = None, *, recover: bool = True,
             use_fts: bool | None = None) -> Store:
        """Open (creating and migrating) the file; default `paths.data_dir()/workbench.db`.

        recover: mark answers a crash left "streaming" as "interrupted" (recover_interrupted).
        Pass False for a second opener while the window may be streaming (a CLI, a viewer).
        use_fts: None picks FTS5 when this sqlite has it; False forces the LIKE search.
        """
        file = Path(path) if path is not None else default_path()
        conn = connect(file)
        try:
            migrate(conn)
            fts = ensure_index(conn, use_fts)
        except BaseException:
            conn.close()
            raise
        store = cls(conn, file, fts)
        if recover:
            store.recovered_on_open = store.recover_interrupted()
        return store

    @property
    def uses_fts(self) -> bool:
        return self._fts

    def close(self) -> None:
        """Close the file (idempotent). Checkpoints the WAL so the .db file stands alone."""
        if self._db is None:
            return
        # Fails only while another connection reads; that one's close will checkpoint.
        with contextlib.suppress(sqlite3.OperationalError):
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()
        self._db = None  # type: ignore[assignment]

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
