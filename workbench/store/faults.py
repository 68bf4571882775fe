"""Why a store cannot be used: the typed failures of opening (and using) the database file.

Store.open raises one of these instead of a bare sqlite3/OS error, so the window can say what
happened and offer what fits: a damaged file is kept untouched (move it aside, salvage it), a
newer file needs a newer workbench, an unwritable or full location runs on a temporary store.
`classify` turns the errors SQLite and the OS raise into them (None: not a fault of the file or
its place, e.g. a bug).
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

# Primary SQLite result codes (the low byte of sqlite3.Error.sqlite_errorcode).
_SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED = 3, 5, 6
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT = 8, 10, 11
_SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 13, 14, 26
LOW_SPACE_BYTES = 1 << 20  # below this much free space an I/O error is taken for a full disk

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_UNWRITABLE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR,
                      errno.EEXIST, errno.ENOENT, errno.ELOOP, errno.ENAMETOOLONG, errno.EIO}


class StoreFault(RuntimeError):
    """The database file, or where it lives, keeps the store from working. `kind` names which."""

    kind = "fault"

    def __init__(self, path: Path | str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = Path(path)
        self.detail = detail


class StoreDamaged(StoreFault):
    """Not a SQLite database, truncated, or with corrupt pages. Never written to."""

    kind = "damaged"


class ForeignStore(StoreDamaged):
    """A sound SQLite database that is not a workbench store (another program's file): refused
    read-only, like a damaged one, so it is left byte for byte as it was (no tables, no journal
    mode, no file beside it)."""


class SchemaTooNew(StoreFault):
    """The file was written by a newer workbench; opening it here could damage it.

    found: the file's schema version; known: the newest this build knows; writer: the
    workbench version that wrote the file's newest step ("" when the file does not say)."""

    kind = "too_new"

    def __init__(self, path: Path | str, found: int, known: int, writer: str = "") -> None:
        by = f" (written by workbench {writer})" if writer else ""
        super().__init__(path, f"database schema version {found}{by}, this build knows {known}")
        self.found, self.known, self.writer = found, known, writer


class StoreUnwritable(StoreFault):
    """The file or its folder cannot be created or written (read-only, no permission, a path
    through a file)."""

    kind = "unwritable"


class StoreBusy(StoreUnwritable):
    """Another program holds the file locked for longer than the busy timeout."""

    kind = "busy"


class StoreFull(StoreFault):
    """The disk (or quota) holding the file is full."""

    kind = "full"


def classify(exc: BaseException, path: Path | str) -> StoreFault | None:
    """The fault behind an error from opening or using the store at `path`, or None."""
    if isinstance(exc, StoreFault):
        return exc
    path = Path(path)
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        if exc.errno in _FULL_ERRNOS:
            return StoreFull(path, reason)
        if exc.errno in _UNWRITABLE_ERRNOS:
            where = f" ({exc.filename})" if exc.filename else ""
            return StoreUnwritable(path, f"{reason}{where}")
        return None
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    detail = str(exc)
    if primary == _SQLITE_FULL:
        return StoreFull(path, detail)
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return StoreBusy(path, detail)
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return StoreDamaged(path, detail)
    if primary in (_SQLITE_READONLY, _SQLITE_CANTOPEN, _SQLITE_PERM, _SQLITE_IOERR):
        # SQLite reports a write that found no space as an I/O error in places (the -shm).
        if low_on_space(path):
            return StoreFull(path, detail)
        return StoreUnwritable(path, detail)
    return None


def low_on_space(path: Path) -> bool:
    """Whether the filesystem that holds (or would hold) `path` has next to no free space."""
    for place in (path, *path.parents):
        try:
            return shutil.disk_usage(place).free < LOW_SPACE_BYTES
        except OSError:
            continue
    return False
