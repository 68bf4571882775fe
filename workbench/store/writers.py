"""Who writes to a database file right now: one locked file per open Store (Qt-free).

Each Store on a file takes a writer lock: a file in `<db>-writers/`, flock-ed exclusively for
as long as the Store is open. The kernel drops a flock when its process ends, however it ends
(a crash, SIGKILL, a power cut leaves no process at all), so "is that file locked?" answers "is
that writer alive?" with no heartbeat and no clock to trust. A streaming answer records its
writer's token (`messages.owner`); start-up recovery marks "interrupted" only the answers whose
writer is gone, so a second window leaves the first one's live answer alone.

A lock file appears under its final name only once it is locked (it is locked under a
temporary name, then renamed), so a prober never takes a starting writer for a dead one.
Without fcntl (Windows) or where the folder cannot be written, a Store has no lock; its
answers are then treated as ownerless (the behaviour before locks).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms the workbench runs on
    fcntl = None  # type: ignore[assignment]

SUFFIX = "-writers"
_LOCK = ".lock"


def lock_dir(db: Path) -> Path:
    return db.with_name(db.name + SUFFIX)


class WriterLock:
    """Held while a Store is open; `token` is what its streaming answers record as owner."""

    def __init__(self, token: str, file: Path, fd: int) -> None:
        self.token, self.file, self._fd = token, file, fd

    @classmethod
    def take(cls, db: Path) -> WriterLock | None:
        if fcntl is None:
            return None
        folder = lock_dir(db)
        token = f"{os.getpid()}-{secrets.token_hex(6)}"
        tmp = folder / f".{token}.tmp"
        fd = -1
        try:
            folder.mkdir(exist_ok=True)
            fd = os.open(tmp, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                     "started_at": time.time()}).encode())
            final = folder / f"{token}{_LOCK}"
            os.rename(tmp, final)
        except OSError:
            if fd >= 0:
                os.close(fd)
                with contextlib.suppress(OSError):
                    tmp.unlink()
            return None
        return cls(token, final, fd)

    def release(self) -> None:
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            self.file.unlink()  # while still locked: no prober can take it for a dead one
        os.close(self._fd)
        self._fd = -1


def live_writers(db: Path) -> set[str]:
    """The tokens of the writers whose process still holds its lock; dead ones' files go."""
    folder = lock_dir(db)
    if fcntl is None or not folder.is_dir():
        return set()
    live: set[str] = set()
    for file in folder.iterdir():
        starting = file.name.endswith(".tmp")  # locked, not yet renamed: owns no answer yet
        if not (starting or file.name.endswith(_LOCK)):
            continue
        try:
            fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile (its writer closed)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not starting:
                    live.add(file.name[: -len(_LOCK)])
                continue
            except OSError:
                continue
            with contextlib.suppress(OSError):
                file.unlink()  # its writer is gone
        finally:
            os.close(fd)
    return live
