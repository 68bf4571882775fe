"""A damaged database: moved aside (kept), and what is readable copied into a fresh store.

`move_aside` renames the file and its WAL/index/journal to `<name>.damaged-YYYYmmdd-HHMMSS`
(+ the same suffixes, so SQLite still pairs them), never deleting or writing anything.
`salvage` reads the moved file read-only: with the sqlite3 command's `.recover` when that
program is installed (it reads rows even from pages the b-trees lost), else row by row, skipping
past pages it cannot read; then `copy_rows` adds what it read to the fresh store, with new ids
and every reference (parents, active leaves, runs, a message's run) mapped, a message whose
conversation was lost under a "Recovered messages" conversation and one whose parent was lost as
a root, so no readable text is dropped. `copy_rows` also merges a temporary store into the real
one. What differs from table to table (references, new ids, defaults) is declared once, in
`_TABLES`; one loop copies every table. Qt-free; runs on the window's database worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from workbench.store.conversations import checked_settings, parsed_settings
from workbench.store.health import read_only, sidecars
from workbench.store.schema import migrate, transaction

RECOVER_TIMEOUT_S = 600
_BATCH = 256
_MAX_ROWID = 1 << 62

Row = dict[str, object]


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
                if n in _BY_NAME}
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


def _rows_within(conn: sqlite3.Connection, table: _Table, target: object, copied: Copied
                 ) -> list[sqlite3.Row]:
    """The table's rows that refer to `target` through its `within` column, in key order."""
    try:
        return conn.execute(f"SELECT * FROM {table.name} WHERE {table.within} = ?"
                            f" ORDER BY {', '.join(table.key)}", (target,)).fetchall()
    except sqlite3.Error:
        copied.unreadable += 1
        return []


# ---- writing into the store ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Ref:
    """A column holding the key of another table's row, mapped to the key that row got here.

    lost: what becomes of a row whose target was not copied (unreadable, refused):
    "null" keeps the row without the reference; "drop" leaves the row out; "home" puts it under
    a "Recovered messages" conversation, so no readable text is dropped; "pull" reads the target
    by its key and inserts it with the row (a target that cannot be read refuses the row); "leaf"
    sets the reference once every message is in (it points at rows copied later), or, lost,
    the conversation's newest leaf (else it would open on nothing)."""

    column: str
    table: str
    lost: Literal["null", "drop", "home", "pull", "leaf"] = "null"


@dataclass(frozen=True)
class _Table:
    """How copy_rows copies one table: what differs from table to table."""

    name: str
    count: str | None = None  # the Copied field its added rows count in
    ids: bool = False  # referred to by rowid: rows get new ids, except those `keep` names
    drop: tuple[str, ...] = ()  # columns not copied
    refs: tuple[_Ref, ...] = ()
    # No rowid to walk (WITHOUT ROWID): rows are read per copied target of this column's ref.
    within: str | None = None
    # Its own key: the order `within` reads rows in and how the rows a kept target already has
    # are known; or the column a "pull" finds it by.
    key: tuple[str, ...] = ()
    fix: Callable[[Row, float], bool] | None = None  # values the store needs; False: refused
    # Columns a kept row takes from src (fixed first): what a temporary store that started as a
    # copy of the file changed in a row the file already has.
    merge: tuple[str, ...] = ()
    verb: str = "INSERT"
    upsert: str = ""  # an ON CONFLICT clause: a row merged into one already there


# The values the schema needs that a damaged or an older file may lack: setdefault where an older
# file has no such column (a NULL in one it has is refused, as the schema refuses it).
def _fix_conversation(row: Row, now: float) -> bool:
    row.setdefault("created_at", now)
    row.setdefault("updated_at", row["created_at"])
    if "settings" in row:
        # A settings value that cannot be read (NULL, not JSON, not an object) is dropped, and so
        # is each entry that is not valid: the conversation then follows the global settings
        # for those, but it is kept, with its title and tree (a NULL would refuse the row).
        own, _ = checked_settings(parsed_settings(row["settings"]))
        row["settings"] = json.dumps(own, sort_keys=True)
    return True


def _fix_message(row: Row, now: float) -> bool:
    if row.get("status") == "streaming":
        row["status"] = "interrupted"  # its writer is not this store
    for text in ("content", "reasoning", "error"):
        if row.get(text) is None and text in row:
            row[text] = ""
    row.setdefault("created_at", now)
    return True


def _fix_image(row: Row, now: float) -> bool:
    # An image whose bytes cannot be read is left off its message rather than shown broken.
    if row.get("data") is None:
        return False
    row["name"] = row.get("name") or ""
    row["created_at"] = row.get("created_at") or now
    return True


def _fix_attachment(row: Row, now: float) -> bool:
    row["name"] = row.get("name") or ""
    return True


def _fix_preset(row: Row, now: float) -> bool:
    if row.get("name") is None:  # SQLite lets a NULL into a TEXT primary key
        return False
    row.setdefault("updated_at", now)
    row["settings"] = row.get("settings") or "{}"
    return True


# In dependency order: a table's targets are copied before it (a "leaf" ref's are not: it is
# set afterwards).
_TABLES: tuple[_Table, ...] = (
    _Table("conversations", count="conversations", ids=True, drop=("id",),
           refs=(_Ref("active_leaf_id", "messages", "leaf"),), fix=_fix_conversation,
           merge=("settings",)),  # the settings an answer on the temporary store ran with
    _Table("messages", count="messages", ids=True, drop=("id", "owner"),
           refs=(_Ref("conversation_id", "conversations", "home"),
                 _Ref("parent_id", "messages")),  # a lost parent: the message is a root
           fix=_fix_message),
    # Only pulled in by the attachments of copied messages: bytes nothing shows are not kept.
    _Table("images", key=("sha256",), fix=_fix_image, verb="INSERT OR IGNORE"),
    _Table("message_images", refs=(_Ref("message_id", "messages", "drop"),
                                   _Ref("sha256", "images", "pull")),
           fix=_fix_attachment, verb="INSERT OR IGNORE"),
    _Table("runs", count="runs", ids=True, drop=("id",), refs=(_Ref("message_id", "messages"),)),
    _Table("run_tokens", count="token_rows", refs=(_Ref("run_id", "runs", "drop"),),
           within="run_id", key=("turn", "step")),
    # The newer of two presets of one name wins.
    _Table("presets", count="presets", fix=_fix_preset,
           upsert=" ON CONFLICT(name) DO UPDATE SET settings = excluded.settings,"
                  " updated_at = excluded.updated_at"
                  " WHERE excluded.updated_at > presets.updated_at"),
)
_BY_NAME = {t.name: t for t in _TABLES}
_PULLED = {ref.table for t in _TABLES for ref in t.refs if ref.lost == "pull"}
# Tables of the schema salvage does not copy, and why: a new file makes its own.
_NOT_COPIED = {"schema_version": "the new file's own migrations write it"}


class SalvageDrift(TypeError):
    """salvage's table list no longer matches the schema: a table or column was added,
    renamed or dropped there and not here (so its rows would be lost, or the copy would fail)."""


def check_tables(tables: tuple[_Table, ...] = _TABLES) -> None:
    """Every table of the schema (as its migrations make it, in memory) is copied or named in
    _NOT_COPIED; every column a _Table names exists. Raises SalvageDrift; run at import."""
    conn = sqlite3.connect(":memory:")
    try:
        migrate(conn)
        schema = {n: [r[1] for r in conn.execute(f"PRAGMA table_info({n})")]
                  for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'"
                                           " AND name NOT LIKE 'sqlite_%'").fetchall()}
    finally:
        conn.close()
    names = {t.name for t in tables}
    problems = [f"table {name!r} is in the schema but not copied (add it to _TABLES, or to "
                "_NOT_COPIED with the reason)" for name in sorted(set(schema) - names
                                                                  - set(_NOT_COPIED))]
    problems += [f"table {name!r} is copied but not in the schema" for name in sorted(
        names - set(schema))]
    for t in tables:
        columns = set(schema.get(t.name, ()))
        named = {*t.drop, *t.key, *t.merge, *(r.column for r in t.refs),
                 *((t.within,) if t.within else ())}
        problems += [f"{t.name}.{c} is named in _TABLES but is not a column" for c in
                     sorted(named - columns) if columns]
        problems += [f"{t.name} refers to table {r.table!r}, which is not copied"
                     for r in t.refs if r.table not in names]
    if problems:
        raise SalvageDrift("; ".join(problems))


check_tables()


def copy_rows(src: sqlite3.Connection, dst: sqlite3.Connection,
              keep: dict[str, int] | None = None) -> Copied:
    """Add src's conversations, messages, images, runs, token rows and presets to the store
    `dst`.

    keep: per table, ids up to which src's rows are already in dst under the same id (a
    temporary store started as a copy of dst's file): those are not added again, and rows
    that refer to them keep the id. Everything else gets a new id. One transaction.
    """
    keep = keep or {}
    copied = Copied()
    src_columns = _tables(src)
    dst_columns = _tables(dst)
    ids: dict[str, dict[object, int]] = {t.name: {} for t in _TABLES if t.ids}
    leaves: list[tuple[_Table, _Ref, int, object]] = []  # (table, ref, new rowid, old target)
    lost_home: list[int] = []  # the "Recovered messages" conversation, made when needed
    now = time.time()

    def kept(table: str, old: object) -> bool:
        return isinstance(old, int) and old <= keep.get(table, 0)

    def pull(ref: _Ref, value: object) -> tuple[_Table, Row] | None:
        target = _BY_NAME[ref.table]
        try:
            r = src.execute(f"SELECT * FROM {target.name} WHERE {target.key[0]} = ?",
                            (value,)).fetchone()
        except sqlite3.Error:
            r = None
        if r is None:
            return None
        row = _row(r, src_columns[target.name], drop=target.drop)
        if target.fix is not None and not target.fix(row, now):
            return None
        return target, row

    def home() -> int | None:
        if not lost_home:
            made = add(_BY_NAME["conversations"], {"title": "Recovered messages",
                                                   "created_at": now, "updated_at": now})
            if made is None:
                return None
            lost_home.append(made)
        return lost_home[0]

    def add(table: _Table, row: Row) -> int | None:
        """Insert one row, its references mapped; its new rowid, None when it was left out."""
        first: list[tuple[_Table, Row]] = []  # pulled targets, inserted with it or not at all
        later: list[tuple[_Ref, object]] = []
        for ref in table.refs:
            value = row.get(ref.column)
            if ref.lost == "leaf":
                row.pop(ref.column, None)
                later.append((ref, value))
                continue
            if ref.lost == "pull":
                if not isinstance(value, str):  # a garbled key refers to nothing
                    return None
                target = pull(ref, value)
                if target is None:
                    copied.skipped += 1
                    return None
                first.append(target)
                continue
            mapped = ids[ref.table].get(value)
            if mapped is None and ref.lost == "drop":
                return None
            if mapped is None and ref.lost == "home":
                mapped = home()
                if mapped is None:
                    return None
            row[ref.column] = mapped
        if table.fix is not None and not table.fix(row, now):
            copied.skipped += 1
            return None
        try:
            with _savepoint(dst):
                for target, target_row in first:
                    _insert(dst, target, target_row, dst_columns[target.name])
                cur = _insert(dst, table, row, dst_columns[table.name])
        except sqlite3.Error:
            copied.skipped += 1
            return None
        if table.count is not None:
            setattr(copied, table.count, getattr(copied, table.count) + cur.rowcount)
        new = int(cur.lastrowid or 0)
        leaves.extend((table, ref, new, value) for ref, value in later)
        return new

    def rows(table: _Table) -> Iterator[sqlite3.Row]:
        if table.within is None:
            yield from readable_rows(src, table.name, copied)
            return
        owner = next(ref.table for ref in table.refs if ref.column == table.within)
        for old, new in ids[owner].items():
            have: set[tuple[object, ...]] = set()
            if kept(owner, old):
                # A kept target (a run) may have gained rows meanwhile: add those it lacks.
                have = {tuple(x) for x in dst.execute(
                    f"SELECT {', '.join(table.key)} FROM {table.name}"
                    f" WHERE {table.within} = ?", (new,))}
            for r in _rows_within(src, table, old, copied):
                if tuple(_get(r, k) for k in table.key) not in have:
                    yield r

    with transaction(dst):
        for table in _TABLES:
            needs = {table.name} | {ref.table for ref in table.refs if ref.lost == "pull"}
            if table.name in _PULLED or not all(t in src_columns and t in dst_columns
                                                for t in needs):
                continue
            for r in rows(table):
                row = _row(r, src_columns[table.name], drop=table.drop)
                if not table.ids:
                    add(table, row)
                    continue
                old = r["_rowid"]
                if kept(table.name, old):
                    ids[table.name][old] = old
                    _merge_kept(dst, table, row, old, dst_columns[table.name], now)
                    continue
                made = add(table, row)
                if made is not None:
                    ids[table.name][old] = made

        # References that could only be mapped once everything was in.
        for old, new in ids["messages"].items():
            if old == new and kept("messages", old):
                continue
            _remap_stats_run(dst, new, ids["runs"])
        for table, ref, row_id, old in leaves:
            leaf = ids[ref.table].get(old) if old is not None else None
            if leaf is None:
                leaf = _newest_leaf(dst, row_id)
            dst.execute(f"UPDATE {table.name} SET {ref.column} = ? WHERE id = ?", (leaf, row_id))
        # Messages added under a kept conversation: it shows the newest of them.
        for conv in {c for c in ids["conversations"].values() if kept("conversations", c)}:
            newest = dst.execute("SELECT MAX(id) FROM messages WHERE conversation_id = ?",
                                 (conv,)).fetchone()[0]
            if newest is not None and newest > keep.get("messages", 0):
                dst.execute("UPDATE conversations SET active_leaf_id = ?, updated_at = ?"
                            " WHERE id = ?", (_newest_leaf(dst, conv), now, conv))
    return copied


def _merge_kept(dst: sqlite3.Connection, table: _Table, row: Row, row_id: int,
                columns: list[str], now: float) -> None:
    """Set a kept row's `merge` columns to src's values. The temporary store's value wins: it
    is what the window showed and ran with last (this window could not write the file
    meanwhile)."""
    names = [n for n in table.merge if n in row and n in columns]
    if not names or (table.fix is not None and not table.fix(row, now)):
        return
    dst.execute(f"UPDATE {table.name} SET {', '.join(f'{n} = ?' for n in names)}"
                " WHERE rowid = ?", [*(row[n] for n in names), row_id])


def _insert(dst: sqlite3.Connection, table: _Table, row: Row, columns: list[str]
            ) -> sqlite3.Cursor:
    names = [n for n in row if n in columns]  # a newer file's columns have no place here
    return dst.execute(f"{table.verb} INTO {table.name} ({', '.join(names)}) VALUES"
                       f" ({', '.join('?' * len(names))}){table.upsert}",
                       [row[n] for n in names])


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
