"""Real database files in the states a user's disk can hold them: damaged in several ways, from a
newer workbench, in a folder that cannot be written, on a disk that fills up. Shared by the
store's unit tests and the window's.

Read-only folders as root: chmod does not stop root, so `read_only_folder` sets the immutable
attribute (chattr +i) on the folder and the file (what a read-only mount looks like: neither can
be written, the file can be read); as another user it uses chmod. It skips the test where
neither works (a filesystem without that attribute). A full disk cannot be made without a
mount, so `filling_disk` caps the store's file with SQLite's PRAGMA max_page_count: SQLite then
fails writes with SQLITE_FULL, the same error a full disk gives it (it maps ENOSPC to it).
`digest` is how a test sees that nothing wrote to a file it must leave alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from workbench.store import SCHEMA_VERSION, Store

PAGE = 4096


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def real_store(path: Path, conversations: int = 40, messages: int = 8) -> dict[str, int]:
    """A store with conversations of user/assistant turns (closed, WAL folded in)."""
    with Store.open(path) as store:
        for i in range(conversations):
            conv = store.create_conversation(f"conversation {i}")
            parent = None
            for j in range(messages):
                role = "user" if j % 2 == 0 else "assistant"
                parent = store.add_message(conv.id, parent, role,
                                           f"message {i}.{j} " + "lorem ipsum " * 30).id
    return {"conversations": conversations, "messages": conversations * messages}


def damage(path: Path, how: str) -> None:
    """Turn the store at `path` into one of the damaged files a user may find."""
    if how == "text file":
        path.write_text("these are my notes, not a database\n" * 20)
        return
    if how == "random header":
        real_store(path, 3, 2)
        data = bytearray(path.read_bytes())
        data[:100] = os.urandom(100)
        path.write_bytes(bytes(data))
        return
    real_store(path)
    if how == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "corrupt middle pages":
        corrupt_pages(path)
    else:
        raise ValueError(how)


def corrupt_pages(path: Path) -> None:
    """Random bytes over a few pages in the middle of the file (of the tables' b-trees)."""
    data = bytearray(path.read_bytes())
    pages = len(data) // PAGE
    for page in (pages // 3, pages // 2, pages // 2 + 1):
        data[page * PAGE:(page + 1) * PAGE] = os.urandom(PAGE)
    path.write_bytes(bytes(data))


def raw_settings(path: Path, values: dict[str, object]) -> None:
    """Write the settings column of the conversations of these titles as given, NULL and any
    text included: what a damaged file can hold (damage to the schema page or to a cell's header
    gets a NULL past NOT NULL), made here by lifting the constraint in the stored schema."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = replace(sql, 'settings TEXT NOT NULL',"
                     " 'settings TEXT') WHERE name = 'conversations'")
        conn.commit()
    with contextlib.closing(sqlite3.connect(path)) as conn:  # reads the schema as changed
        for title, value in values.items():
            conn.execute("UPDATE conversations SET settings = ? WHERE title = ?", (value, title))
        conn.commit()


DAMAGES = ("truncated", "random header", "text file", "corrupt middle pages")


def newer_store(path: Path, writer: str = "9.1.0") -> None:
    """A store a newer workbench wrote: one schema step past this build's."""
    real_store(path, 2, 2)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version (version, applied_at, app_version)"
                     " VALUES (?, 0, ?)", (SCHEMA_VERSION + 1, writer))
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()


def _set_immutable(path: Path, on: bool) -> bool:
    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True,
                          check=False)
    return done.returncode == 0


@contextlib.contextmanager
def read_only_folder(folder: Path) -> Iterator[None]:
    """The folder and the files in it cannot be written (by this process) inside the block."""
    folder.mkdir(parents=True, exist_ok=True)
    targets = [folder, *[p for p in folder.iterdir() if p.is_file()]]
    as_root = os.geteuid() == 0
    modes = {p: p.stat().st_mode for p in targets}
    try:
        for p in targets:
            if as_root:
                _set_immutable(p, True)
            else:
                p.chmod(0o555 if p.is_dir() else 0o444)
        probe = folder / ".probe"
        try:
            probe.touch()
        except OSError:
            pass
        else:
            probe.unlink()
            pytest.skip("this filesystem lets the test process write any folder (no chattr)")
        yield
    finally:
        for p in reversed(targets):
            if as_root:
                _set_immutable(p, False)
            else:
                p.chmod(modes[p])


def filling_disk(monkeypatch: pytest.MonkeyPatch, pages: int | None = None
                 ) -> Callable[[], None]:
    """From now on every store connection is capped at `pages` pages (None: at the file's size
    when opened), so the first write that needs a new page fails as on a full disk. Returns
    a function that lifts the cap for connections opened after it."""
    from workbench.store import schema, store

    real = schema.connect
    capped = [True]

    def connect(path: Path | str) -> sqlite3.Connection:
        conn = real(path)
        if capped[0] and str(path) != ":memory:":  # the disk is full, not the memory
            size = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {max(1, size if pages is None else pages)}")
        return conn

    monkeypatch.setattr(store, "connect", connect)

    def lift() -> None:
        capped[0] = False

    return lift
