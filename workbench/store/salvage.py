"""A damaged database: moved aside (kept), and what is readable copied into a fresh store.

`move_aside` renames the file and its WAL/index/journal to `<name>.damaged-YYYYmmdd-HHMMSS`
(+ the same suffixes, so SQLite still pairs them), never deleting or writing anything.
`salvage` reads the moved file read-only: with the sqlite3 command's `.recover` when that
program is installed (it reads rows even from pages the b-trees lost), else row by row, skipping
past pages it cannot read; then `copy_rows` adds what it read to the fresh store, with new ids
and every reference (parents, active leaves, runs, a message's run) mapped, a message whose
conversation was lost under a "Recovered messages" conversation and one whose parent was lost as
a root, so no readable text is dropped. `copy_rows` also merges a temporary store into the real
one. Qt-free; runs on the window's database worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from workbench.store.health import read_only, sidecars
from workbench.store.schema import transaction

RECOVER_TIMEOUT_S = 600
_BATCH = 256
_MAX_ROWID = 1 << 62
_TOKEN_KEY = ("turn", "step")


@dataclass
class Copied:
    """What copy_rows added, and what it could not read or insert."""

    conversations: int = 0
    messages: int = 0
    runs: int = 0
    token_rows: int = 0
    presets: int = 0
    skipped: int = 0  # rows read but refused by the schema (a garbled role, say)
    unreadable: int = 0  # places where a read failed (a corrupt page: its rows are lost)

    def add(self, other: Copied) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class SalvageReport:
    aside: Path  # where the damaged file now is (kept)
    method: str = ""  # "sqlite3 .recover" or "row by row"
    copied: Copied = field(default_factory=Copied)
    problems: list[str] = field(default_factory=list)


def aside_name(path: Path, now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    candidate = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while candidate.exists() or any(s.exists() for s in sidecars(candidate)):
        n += 1
        candidate = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    return candidate


def move_aside(path: Path, now: float | None = None) -> Path:
    """Rename the database and its side files out of the way; returns the new name.

    Only renames in the same folder (atomic, no copy, nothing lost). The side files are moved
    first and the database last, so a failure half-way leaves the database where it was."""
    target = aside_name(path, now)
    moved: list[tuple[Path, Path]] = []
    try:
        for side, new_side in zip(sidecars(path), sidecars(target), strict=True):
            if side.exists():
                os.rename(side, new_side)
                moved.append((new_side, side))
        os.rename(path, target)
    except OSError:
        for new_side, side in reversed(moved):
            with contextlib.suppress(OSError):
                os.rename(new_side, side)
        raise
    return target


def salvage(damaged: Path, dst: sqlite3.Connection, *, cli: str | None = "auto") -> SalvageReport:
    """Copy what is readable of `damaged` (read-only) into the store connection `dst`.

    cli: the sqlite3 program for `.recover`; "auto" finds it on PATH, None never uses it."""
    report = SalvageReport(aside=damaged)
    program = shutil.which("sqlite3") if cli == "auto" else cli
    if program:
        try:
            scratch, errors = _recovered(program, damaged)
        except (OSError, subprocess.SubprocessError, sqlite3.Error) as exc:
            report.problems.append(f"sqlite3 .recover failed ({exc}); read row by row instead")
        else:
            try:
                if _has_rows(scratch):
                    report.copied = copy_rows(scratch, dst)
                    report.method = "sqlite3 .recover"
                    return report
            finally:
                scratch.close()
            report.problems.append(f"sqlite3 .recover found nothing ({errors or 'no rows'});"
                                   " read row by row instead")
    try:
        src = read_only(damaged)
    except sqlite3.Error as exc:
        report.problems.append(f"the file cannot be opened at all: {exc}")
        report.method = report.method or "row by row"
        return report
    try:
        report.copied = copy_rows(src, dst)
        report.method = "row by row"
    finally:
        src.close()
    return report


def _has_rows(conn: sqlite3.Connection) -> bool:
    tables = _tables(conn)
    return any(conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is not None
               for t in ("conversations", "messages") if t in tables)


def _recovered(program: str, damaged: Path) -> tuple[sqlite3.Connection, str]:
    """The sqlite3 command's `.recover` of the file replayed into an in-memory database, and
    what the command said on stderr."""
    out = subprocess.run(
        [program, "-readonly", str(damaged), ".recover"], capture_output=True,
        timeout=RECOVER_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
    )
    errors = out.stderr.decode("utf-8", "replace").strip()[:200]
    scratch = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    scratch.row_factory = sqlite3.Row
    scratch.text_factory = lambda b: b.decode("utf-8", "replace")
    for statement in _complete_statements(out.stdout.decode("utf-8", "replace")):
        # The search index and its triggers are rebuilt by the store; replayed here they
        # would fire on every recovered message (and fail it with them).
        if "messages_fts" in statement or statement.lstrip()[:14].upper() == "CREATE TRIGGER":
            continue
        with contextlib.suppress(sqlite3.Error):
            scratch.execute(statement)
    if scratch.in_transaction:
        scratch.execute("COMMIT")
    return scratch, errors


def _complete_statements(script: str) -> Iterator[str]:
    """The script's whole statements; a cut-off last one is dropped (a tolerant statements())."""
    pending = ""
    for chunk in script.split(";"):
        pending += chunk + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                yield pending.strip()
            pending = ""


# ---- reading whatever can be read ---------------------------------------------------------------


def _tables(conn: sqlite3.Connection) -> dict[str, list[str]]:
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: [r[1] for r in conn.execute(f"PRAGMA table_info({n})")] for n in names
                if n in ("conversations", "messages", "runs", "run_tokens", "presets", "images",
                         "message_images")}
    except sqlite3.Error:
        return {}


def readable_rows(conn: sqlite3.Connection, table: str, copied: Copied
                  ) -> Iterator[sqlite3.Row]:
    """The table's rows in rowid order; past a page that cannot be read, the walk seeks ahead
    to the next rowid it can reach (each failure counts once in copied.unreadable)."""
    last = -_MAX_ROWID
    while True:
        try:
            rows = conn.execute(f"SELECT rowid AS _rowid, * FROM {table} WHERE rowid > ?"
                                f" ORDER BY rowid LIMIT {_BATCH}", (last,)).fetchall()
        except sqlite3.Error:
            rows = []
            try:  # the batch failed somewhere: take its rows one by one up to the bad one
                while True:
                    one = conn.execute(f"SELECT rowid AS _rowid, * FROM {table}"
                                       " WHERE rowid > ? ORDER BY rowid LIMIT 1", (last,)
                                       ).fetchone()
                    if one is None:
                        return
                    yield one
                    last = one["_rowid"]
            except sqlite3.Error:
                copied.unreadable += 1
                resume = _next_readable(conn, table, last)
                if resume is None:
                    return
                last = resume - 1
                continue
        if not rows:
            return
        yield from rows
        last = rows[-1]["_rowid"]


def _next_readable(conn: sqlite3.Connection, table: str, after: int) -> int | None:
    """The smallest rowid > `after` from which a read works (approximately: found by doubling
    the jump, then halving back), or None when nothing further can be read."""

    def first_from(x: int) -> int | bool | None:
        try:
            row = conn.execute(f"SELECT rowid FROM {table} WHERE rowid > ? ORDER BY rowid"
                               " LIMIT 1", (x,)).fetchone()
            if row is None:
                return None
            conn.execute(f"SELECT * FROM {table} WHERE rowid = ?", (row[0],)).fetchone()
            return int(row[0])
        except sqlite3.Error:
            return False

    jump, bad = 1, after
    while True:
        probe = after + jump
        if probe >= _MAX_ROWID:
            return None
        found = first_from(probe)
        if found is None:
            return None
        if found is not False:
            break
        bad, jump = probe, jump * 2
    low, high, best = bad, probe, found  # reads fail from `low`, work from `high`
    while high - low > 1:
        mid = (low + high) // 2
        got = first_from(mid)
        if got is False:
            low = mid
        elif got is None:
            return best
        else:
            high, best = mid, got
    return best


def _token_rows(conn: sqlite3.Connection, run_id: int, copied: Copied
                ) -> list[sqlite3.Row]:
    try:
        return conn.execute("SELECT * FROM run_tokens WHERE run_id = ? ORDER BY turn, step",
                            (run_id,)).fetchall()
    except sqlite3.Error:
        copied.unreadable += 1
        return []


# ---- writing into the store ---------------------------------------------------------------------


def copy_rows(src: sqlite3.Connection, dst: sqlite3.Connection,
              keep: dict[str, int] | None = None) -> Copied:
    """Add src's conversations, messages, runs, token rows and presets to the store `dst`.

    keep: per table, ids up to which src's rows are already in dst under the same id (a
    temporary store started as a copy of dst's file): those are not added again, and rows
    that refer to them keep the id. Everything else gets a new id. One transaction.
    """
    keep = keep or {}
    copied = Copied()
    src_tables = _tables(src)
    dst_columns = _tables(dst)
    conv_ids: dict[int, int] = {}
    message_ids: dict[int, int] = {}
    run_ids: dict[int, int] = {}
    leaves: dict[int, int | None] = {}
    lost_home: list[int] = []  # the "Recovered messages" conversation, made when needed
    now = time.time()

    def kept(table: str, old: object) -> bool:
        return isinstance(old, int) and old <= keep.get(table, 0)

    def insert(table: str, row: dict[str, object]) -> int | None:
        names = [n for n in row if n in dst_columns[table]]
        try:
            with _savepoint(dst):
                cur = dst.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES"
                                  f" ({', '.join('?' * len(names))})", [row[n] for n in names])
        except sqlite3.Error:
            copied.skipped += 1
            return None
        return int(cur.lastrowid or 0)

    with transaction(dst):
        if "conversations" in src_tables:
            for r in readable_rows(src, "conversations", copied):
                old = r["_rowid"]
                if kept("conversations", old):
                    conv_ids[old] = old
                    continue
                row = _row(r, src_tables["conversations"], drop=("id", "active_leaf_id"))
                row.setdefault("created_at", now)
                row.setdefault("updated_at", row["created_at"])
                new = insert("conversations", row)
                if new is not None:
                    conv_ids[old] = new
                    leaves[new] = _get(r, "active_leaf_id")
                    copied.conversations += 1

        if "messages" in src_tables:
            for r in readable_rows(src, "messages", copied):
                old = r["_rowid"]
                if kept("messages", old):
                    message_ids[old] = old
                    continue
                row = _row(r, src_tables["messages"], drop=("id", "owner"))
                conv = conv_ids.get(_get(r, "conversation_id"))  # type: ignore[arg-type]
                if conv is None:
                    if not lost_home:
                        made = insert("conversations", {"title": "Recovered messages",
                                                        "created_at": now, "updated_at": now})
                        if made is None:
                            continue
                        lost_home.append(made)
                        leaves[made] = None
                        copied.conversations += 1
                    conv = lost_home[0]
                row["conversation_id"] = conv
                parent = _get(r, "parent_id")
                row["parent_id"] = message_ids.get(parent) if parent is not None else None
                if row.get("status") == "streaming":
                    row["status"] = "interrupted"  # its writer is not this store
                for text in ("content", "reasoning", "error"):
                    if row.get(text) is None and text in row:
                        row[text] = ""
                row.setdefault("created_at", now)
                new = insert("messages", row)
                if new is not None:
                    message_ids[old] = new
                    copied.messages += 1

        if "images" in src_tables and "message_images" in src_tables and "images" in dst_columns:
            _copy_images(src, dst, message_ids, copied)

        if "runs" in src_tables:
            for r in readable_rows(src, "runs", copied):
                old = r["_rowid"]
                if kept("runs", old):
                    run_ids[old] = old
                    continue
                row = _row(r, src_tables["runs"], drop=("id",))
                mid = row.get("message_id")
                row["message_id"] = message_ids.get(mid) if mid is not None else None
                new = insert("runs", row)
                if new is not None:
                    run_ids[old] = new
                    copied.runs += 1

        if "run_tokens" in src_tables:
            for old, new in run_ids.items():
                if kept("runs", old):
                    # A kept run may have gained rows meanwhile: add those it lacks.
                    have = {tuple(x) for x in dst.execute(
                        "SELECT turn, step FROM run_tokens WHERE run_id = ?", (new,))}
                else:
                    have = set()
                for r in _token_rows(src, old, copied):
                    row = _row(r, src_tables["run_tokens"], drop=())
                    if tuple(row.get(k) for k in _TOKEN_KEY) in have:
                        continue
                    row["run_id"] = new
                    if insert("run_tokens", row) is not None:
                        copied.token_rows += 1

        # References that could only be mapped once everything was in.
        for old, new in message_ids.items():
            if old == new and kept("messages", old):
                continue
            _remap_stats_run(dst, new, run_ids)
        for conv, old_leaf in leaves.items():
            leaf = message_ids.get(old_leaf) if old_leaf is not None else None
            if leaf is None:
                leaf = _newest_leaf(dst, conv)
            dst.execute("UPDATE conversations SET active_leaf_id = ? WHERE id = ?", (leaf, conv))
        # Messages added under a kept conversation: it shows the newest of them.
        for conv in {c for c in conv_ids.values() if kept("conversations", c)}:
            newest = dst.execute("SELECT MAX(id) FROM messages WHERE conversation_id = ?",
                                 (conv,)).fetchone()[0]
            if newest is not None and newest > keep.get("messages", 0):
                dst.execute("UPDATE conversations SET active_leaf_id = ?, updated_at = ?"
                            " WHERE id = ?", (_newest_leaf(dst, conv), now, conv))

        if "presets" in src_tables:
            for r in readable_rows(src, "presets", copied):
                row = _row(r, src_tables["presets"], drop=())
                if row.get("name") is None:
                    copied.skipped += 1
                    continue
                row.setdefault("updated_at", now)
                try:
                    with _savepoint(dst):
                        cur = dst.execute(
                            "INSERT INTO presets (name, settings, updated_at) VALUES (?, ?, ?)"
                            " ON CONFLICT(name) DO UPDATE SET settings = excluded.settings,"
                            " updated_at = excluded.updated_at"
                            " WHERE excluded.updated_at > presets.updated_at",
                            (row["name"], row.get("settings") or "{}", row["updated_at"]))
                except sqlite3.Error:
                    copied.skipped += 1
                    continue
                copied.presets += cur.rowcount
    return copied


def _copy_images(src: sqlite3.Connection, dst: sqlite3.Connection, message_ids: dict[int, int],
                 copied: Copied) -> None:
    """The readable attachments of the copied messages, and the bytes they refer to (an image
    whose bytes cannot be read is left off its message rather than shown broken)."""
    for r in readable_rows(src, "message_images", copied):
        message = message_ids.get(_get(r, "message_id"))  # type: ignore[arg-type]
        sha = _get(r, "sha256")
        if message is None or not isinstance(sha, str):
            continue
        try:
            data = src.execute("SELECT data, name, created_at FROM images WHERE sha256 = ?",
                               (sha,)).fetchone()
        except sqlite3.Error:
            data = None
        if data is None or data["data"] is None:
            copied.skipped += 1
            continue
        try:
            with _savepoint(dst):
                dst.execute("INSERT OR IGNORE INTO images (sha256, data, name, created_at)"
                            " VALUES (?, ?, ?, ?)", (sha, data["data"], data["name"] or "",
                                                     data["created_at"] or time.time()))
                dst.execute("INSERT OR IGNORE INTO message_images (message_id, position,"
                            " sha256, name) VALUES (?, ?, ?, ?)",
                            (message, _get(r, "position"), sha, _get(r, "name") or ""))
        except sqlite3.Error:
            copied.skipped += 1


def _get(r: sqlite3.Row, name: str) -> object:
    """The column's value, None when the table has no such column (an older file)."""
    return r[name] if name in r.keys() else None  # noqa: SIM118 (`in` on a Row tests values)


def _row(r: sqlite3.Row, columns: list[str], drop: tuple[str, ...]) -> dict[str, object]:
    return {c: r[c] for c in columns if c not in drop}


def _remap_stats_run(dst: sqlite3.Connection, message_id: int, run_ids: dict[int, int]) -> None:
    row = dst.execute("SELECT stats FROM messages WHERE id = ?", (message_id,)).fetchone()
    try:
        stats = json.loads(row[0]) if row and row[0] else {}
    except (TypeError, ValueError):
        stats = None
    if not isinstance(stats, dict):
        dst.execute("UPDATE messages SET stats = '{}' WHERE id = ?", (message_id,))
        return
    old = stats.get("run_id")
    if old is None:
        return
    new = run_ids.get(old) if isinstance(old, int) else None
    if new == old:
        return
    if new is None:
        stats.pop("run_id", None)
        stats.pop("x_start", None)
    else:
        stats["run_id"] = new
    dst.execute("UPDATE messages SET stats = ? WHERE id = ?", (json.dumps(stats), message_id))


def _newest_leaf(dst: sqlite3.Connection, conversation_id: int) -> int | None:
    row = dst.execute(
        "SELECT m.id FROM messages m WHERE m.conversation_id = ? AND NOT EXISTS"
        " (SELECT 1 FROM messages c WHERE c.parent_id = m.id)"
        " ORDER BY m.created_at DESC, m.id DESC LIMIT 1", (conversation_id,)).fetchone()
    return None if row is None else int(row[0])


@contextlib.contextmanager
def _savepoint(conn: sqlite3.Connection) -> Iterator[None]:
    """One row's insert: undone alone when the schema refuses it."""
    conn.execute("SAVEPOINT copy_row")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO copy_row")
        conn.execute("RELEASE copy_row")
        raise
    conn.execute("RELEASE copy_row")
