"""Looking at a database file before anything writes to it (read-only, Qt-free).

`check_file` raises StoreDamaged for a file that is not a whole SQLite database (a text file,
random bytes, a truncated copy, corrupt pages: `PRAGMA quick_check`, about 0.1 s per 100 MB)
and SchemaTooNew for one a newer workbench wrote. It opens the file read-only, so a damaged
file is left exactly as it was; connect() and the migrations only run on a file that passed.
`read_only(path)` is the same read-only connection, for salvage and for a temporary copy.
"""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path
from urllib.parse import quote

from workbench.file_kind import not_regular
from workbench.store.faults import (
    ForeignStore,
    SchemaTooNew,
    StoreDamaged,
    StoreUnwritable,
    classify,
)

HEADER = b"SQLite format 3\x00"
_HEADER_LEN = 100
_CHECK_LINES = 3  # quick_check lines quoted in the message


def sidecars(path: Path) -> list[Path]:
    """The files SQLite keeps beside the database (WAL, its index, a rollback journal)."""
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


def _wal_has_frames(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    try:
        return wal.stat().st_size > 32  # more than the WAL header: commits not yet in the file
    except OSError:
        return False


def _wal_mode_without_wal(path: Path) -> bool:
    """The header says WAL (read and write versions 2) and no -wal file is beside it."""
    try:
        with path.open("rb") as f:
            head = f.read(20)
    except OSError:
        return False
    wal = path.with_name(path.name + "-wal")
    return head.startswith(HEADER) and head[18:20] == b"\x02\x02" and not wal.exists()


def read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection that cannot change the file (nor run its WAL recovery into it).

    In a folder where SQLite may not create the WAL index, the file is opened as immutable,
    which is only right when no WAL holds commits the file lacks; then the error stands."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    if _wal_mode_without_wal(path):
        # A read-only connection to a WAL-mode file makes its -wal and -shm beside it and leaves
        # them (it may not delete them): with no WAL present there is nothing it could hold that
        # the file lacks, so immutable reads the same and creates nothing.
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError as exc:
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) != 14 or _wal_has_frames(path):
            raise  # SQLITE_CANTOPEN is the only one that immutable can help with
        conn = sqlite3.connect(uri + "&immutable=1", uri=True, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    # A damaged page may hold bytes that are not UTF-8: read them, replaced, rather than fail.
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    return conn


def check_header(path: Path) -> None:
    """StoreDamaged unless the file is empty or starts with a sane SQLite header and is as long
    as that header says (truncation is only judged when no WAL holds newer pages)."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEADER_LEN)
        size = path.stat().st_size
    except OSError as exc:
        raise (classify(exc, path) or StoreUnwritable(path, str(exc))) from exc
    if not head:
        return  # an empty file is an empty database
    if not head.startswith(HEADER):
        shown = head[:16].decode("ascii", "replace")
        printable = "".join(c if c.isprintable() else "·" for c in shown)
        raise StoreDamaged(path, f"not a SQLite database (it begins with “{printable}”)")
    if len(head) < _HEADER_LEN:
        raise StoreDamaged(path, f"truncated: {size} bytes, less than a database header")
    (page_size,) = struct.unpack(">H", head[16:18])
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise StoreDamaged(path, f"the header names an impossible page size ({page_size})")
    # The page count at offset 28 is only valid when the change counter (24) equals the
    # "version valid for" number (92); older writers left it stale.
    counter, pages = struct.unpack(">II", head[24:32])
    (version_valid_for,) = struct.unpack(">I", head[92:96])
    if pages and counter == version_valid_for and not _wal_has_frames(path) \
            and size < pages * page_size:
        raise StoreDamaged(path, f"truncated: {size:,} bytes where the header says "
                                 f"{pages * page_size:,}")


def check_file(path: Path, known_version: int) -> None:
    """Raise StoreDamaged or SchemaTooNew (or StoreUnwritable when it cannot even be read);
    return quietly for a missing, empty or sound file. Writes nothing."""
    if not path.exists():
        return
    if kind := not_regular(path):  # a FIFO would block the first read forever
        raise StoreUnwritable(path, f"{kind} is where the database file should be")
    check_header(path)
    if path.stat().st_size == 0:
        return
    try:
        conn = read_only(path)
    except sqlite3.Error as exc:
        raise (classify(exc, path) or StoreDamaged(path, str(exc))) from exc
    try:
        try:
            lines = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
            found, writer = stored_version(conn)
            foreign = foreign_tables(conn)
        except sqlite3.Error as exc:
            fault = classify(exc, path)
            raise (fault if fault is not None else StoreDamaged(path, str(exc))) from exc
    finally:
        conn.close()
    if lines != ["ok"]:
        extra = len(lines) - _CHECK_LINES
        more = f" (and {extra} more problems)" if extra > 0 else ""
        raise StoreDamaged(path, "corrupt pages: " + "; ".join(lines[:_CHECK_LINES]) + more)
    if foreign:  # before the version: another program's user_version says nothing of ours
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ForeignStore(path, f"not a workbench store: it holds another program's tables "
                                 f"({shown}) and no workbench schema; it was left untouched")
    if found > known_version:
        raise SchemaTooNew(path, found, known_version, writer)


def foreign_tables(conn: sqlite3.Connection) -> list[str]:
    """The tables of a database that is not a workbench store (read-only): every table when it
    has some but neither `schema_version` (the first thing a workbench store holds) nor
    `conversations` (which a later workbench that kept only user_version would still have);
    else []."""
    tables = sorted(r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"))
    return [] if not tables or {"schema_version", "conversations"} & set(tables) else tables


def stored_version(conn: sqlite3.Connection) -> tuple[int, str]:
    """(schema version, the workbench version that wrote it, "" if unknown), read-only.

    The version is the larger of the schema_version table's and SQLite's user_version (which
    this build also sets), so a future build that keeps only one of them is still seen."""
    user_version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_version" not in tables:
        return user_version, ""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(schema_version)")}
    if "app_version" in columns:
        row = conn.execute("SELECT version, app_version FROM schema_version"
                           " ORDER BY version DESC LIMIT 1").fetchone()
    else:
        row = conn.execute("SELECT version, '' FROM schema_version"
                           " ORDER BY version DESC LIMIT 1").fetchone()
    if row is None:
        return user_version, ""
    version, writer = int(row[0]), str(row[1] or "")
    if user_version > version:
        return user_version, ""
    return version, writer
