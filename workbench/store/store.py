"""The Store: one SQLite file holding conversations, runs and presets.

Threading: every method is synchronous and short, meant to run on the window's database worker
thread. A Store may be opened on one thread and used on another (check_same_thread is off),
but it must be used from ONE thread at a time; give each thread its own Store if two need it.
Several Stores (or processes, a second window) may open the same file; WAL lets readers run
beside one writer, and each Store's writer lock (writers.py) keeps start-up recovery off the
answers another live Store is streaming. Opening checks the file read-only first and raises a
StoreFault (faults.py) for a damaged, newer, unwritable or full one; open_temporary is the
window's fallback, salvage.py what it offers for a damaged file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from types import TracebackType

from workbench import paths
from workbench.file_kind import regular_file
from workbench.store.conversations import ConversationOps
from workbench.store.export import ExportOps
from workbench.store.faults import StoreDamaged, StoreFault, classify
from workbench.store.health import check_file, read_only
from workbench.store.images import ImageOps
from workbench.store.messages import MessageOps, mark_interrupted
from workbench.store.presets import PresetOps
from workbench.store.runs import RunOps
from workbench.store.schema import SCHEMA_VERSION, connect, migrate
from workbench.store.search import SearchOps, ensure_index
from workbench.store.writers import WriterLock, live_writers

DB_NAME = "workbench.db"
TEMPORARY_COPY_LIMIT = 512 << 20  # bytes: a larger file is not copied into memory
_ID_TABLES = ("conversations", "messages", "runs")


def default_path() -> Path:
    return paths.data_dir() / DB_NAME


class Store(ConversationOps, MessageOps, SearchOps, RunOps, PresetOps, ExportOps, ImageOps):
    """Open with Store.open(path); every method commits before returning."""

    def __init__(self, conn: sqlite3.Connection, path: Path, fts: bool) -> None:
        self._db = conn
        self._fts = fts
        self.path = path
        self.recovered_on_open = 0  # answers marked "interrupted" by open(recover=True)
        self.writer: WriterLock | None = None  # held while open (writers.py)
        # A temporary store lives in memory (Store.open_temporary); `seeded` holds, per table,
        # the largest id copied in from the file it started as a copy of (0: none).
        self.temporary = False
        self.seeded: dict[str, int] = {}

    @classmethod
    def open(cls, path: Path | str | None = None, *, recover: bool = True,
             use_fts: bool | None = None) -> Store:
        """Open (creating and migrating) the file; default `paths.data_dir()/workbench.db`.

        recover: mark answers a crash left "streaming" as "interrupted" (recover_interrupted);
        answers another live Store is streaming (a second window) are left alone.
        use_fts: None picks FTS5 when this sqlite has it; False forces the LIKE search.

        Raises a StoreFault (faults.py) when the file or its place is the problem: StoreDamaged
        (checked read-only first: a damaged file is never written), SchemaTooNew,
        StoreUnwritable, StoreFull.
        """
        file = Path(path) if path is not None else default_path()
        try:
            check_file(file, SCHEMA_VERSION)
            conn = connect(file)
            store: Store | None = None
            try:
                migrate(conn)
                fts = ensure_index(conn, use_fts)
                store = cls(conn, file, fts)
                store.writer = None if str(file) == ":memory:" else WriterLock.take(file)
                store._owner = store.writer.token if store.writer else ""
                if recover:
                    store.recovered_on_open = store.recover_interrupted()
            except BaseException:
                if store is not None and store.writer is not None:
                    store.writer.release()
                conn.close()
                raise
        except StoreFault:
            raise
        except (OSError, sqlite3.Error) as exc:
            fault = classify(exc, file)
            if fault is None and isinstance(exc, sqlite3.DatabaseError):
                # It passed the check, yet this build cannot use it (another program's
                # database at this path, say): like a damaged one, it must not be touched.
                fault = StoreDamaged(file, f"not a workbench database this build can use: {exc}")
            if fault is None:
                raise
            raise fault from exc
        return store

    @classmethod
    def open_temporary(cls, copy_of: Path | None = None, *, use_fts: bool | None = None
                       ) -> Store:
        """A store in memory, gone when closed: for a window whose file cannot be used.

        copy_of: a readable database file (a read-only or full location) to start from, so
        its conversations can still be read; copied read-only, skipped when unreadable or
        larger than TEMPORARY_COPY_LIMIT. Nothing is ever written to that file.
        """
        conn = connect(":memory:")
        seeded: dict[str, int] = {}
        try:
            if copy_of is not None:
                seeded = _copy_into(copy_of, conn)
            migrate(conn)
        except (OSError, sqlite3.Error):  # not copied whole, or not a schema this build knows
            conn.close()
            conn, seeded = connect(":memory:"), {}
            migrate(conn)
        store = cls(conn, Path(":memory:"), ensure_index(conn, use_fts))
        store.temporary, store.seeded = True, seeded
        mark_interrupted(conn)  # the copy's writers are not this store's
        return store

    def recover_interrupted(self) -> int:
        return mark_interrupted(self._db, self._live_owners())

    def _live_owners(self) -> set[str]:
        if self.temporary or str(self.path) == ":memory:":
            return {self._owner} - {""}
        return live_writers(self.path) | ({self._owner} - {""})

    def other_writers(self) -> set[str]:
        """Live writers on this file other than this store (another window, a CLI)."""
        if self.temporary or str(self.path) == ":memory:":
            return set()
        return live_writers(self.path) - {self._owner}

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
        if self.writer is not None:
            self.writer.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _copy_into(source: Path, conn: sqlite3.Connection) -> dict[str, int]:
    """Copy a readable database file into `conn` (SQLite's backup, read-only on the source);
    returns the largest id copied per table ({} when too large to copy). Raises when the
    copy failed."""
    if not source.exists() or source.stat().st_size > TEMPORARY_COPY_LIMIT:
        return {}
    src = read_only(regular_file(source, "a database file"))
    try:
        src.backup(conn)
    finally:
        src.close()
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return {t: int(conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t}").fetchone()[0])
            for t in _ID_TABLES if t in tables}
