"""The database file: connection settings, the schema as numbered migrations, transactions.

Every public Store method runs in one short transaction and commits, so a process killed at any
moment leaves the file at the last committed write (WAL journal). synchronous=NORMAL in WAL
mode survives a killed process; only a power cut can lose the last few commits, never corrupt.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from workbench import __version__
from workbench.store.faults import SchemaTooNew
from workbench.store.health import stored_version

# A step that rebuilds a table starts with this line: it runs with foreign keys off (a DROP
# TABLE would otherwise delete every row that refers to the table, through ON DELETE actions),
# and is checked with foreign_key_check before it commits.
REBUILD = "-- rebuild: foreign keys off\n"

# Step N brings the file from version N-1 to N. Append, never edit a released step: files on
# users' disks were made by the old text. Scripts may hold several statements (split below).
MIGRATIONS: list[str] = [
    # 1: conversations as message trees, runs with per-token rows, presets.
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        active_leaf_id INTEGER REFERENCES messages(id) ON DELETE SET NULL,
        deleted_at REAL
    );
    CREATE INDEX conversations_updated ON conversations(deleted_at, updated_at);

    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
        content TEXT NOT NULL DEFAULT '',
        reasoning TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'complete' CHECK (status IN
            ('complete', 'streaming', 'stopped', 'interrupted', 'error', 'rejected')),
        error TEXT NOT NULL DEFAULT '',
        stats TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_tree ON messages(conversation_id, parent_id);
    CREATE INDEX messages_parent ON messages(parent_id);
    CREATE INDEX messages_status ON messages(status);

    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        message_id INTEGER REFERENCES messages(id) ON DELETE SET NULL,
        created_at REAL NOT NULL,
        label TEXT NOT NULL DEFAULT '',
        settings TEXT NOT NULL DEFAULT '{}',
        model TEXT NOT NULL DEFAULT '{}',
        engine_version TEXT NOT NULL DEFAULT '',
        info TEXT NOT NULL DEFAULT '{}',
        summary TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX runs_message ON runs(message_id);
    CREATE INDEX runs_created ON runs(created_at);

    -- One row per generated token: the numeric TokenMetrics fields by name, plus the piece.
    -- The cumulative text/reasoning fields are left out (they grow quadratically; the message
    -- holds the final text).
    CREATE TABLE run_tokens (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        turn INTEGER NOT NULL,
        step INTEGER NOT NULL,
        steps INTEGER NOT NULL,
        wall_ms REAL NOT NULL,
        cpu_ms REAL NOT NULL,
        majflt INTEGER NOT NULL,
        majflt_mib REAL NOT NULL,
        loop_overhead_ms REAL NOT NULL,
        rss_mib REAL NOT NULL,
        rss_anon_mib REAL NOT NULL,
        rss_file_mib REAL NOT NULL,
        swap_mib REAL NOT NULL,
        mem_available_mib REAL NOT NULL,
        mem_free_mib REAL NOT NULL,
        swap_free_mib REAL NOT NULL,
        io_ms REAL NOT NULL,
        mgmt_ms REAL NOT NULL,
        stall_ms REAL NOT NULL,
        compute_ms REAL NOT NULL,
        read_bytes INTEGER NOT NULL,
        cache_hit_pct REAL NOT NULL,
        cache_budget_mib REAL NOT NULL,
        dense_resident_frac REAL NOT NULL,
        mtp_batch INTEGER NOT NULL,
        mtp_draft_ms REAL NOT NULL,
        drain_ms REAL NOT NULL,
        adopt_ms REAL NOT NULL,
        ra_issue_ms REAL NOT NULL,
        ra_wd_ms REAL NOT NULL,
        token_id INTEGER NOT NULL,
        piece TEXT NOT NULL,
        PRIMARY KEY (run_id, turn, step)
    ) WITHOUT ROWID;

    CREATE TABLE presets (
        name TEXT PRIMARY KEY,
        settings TEXT NOT NULL DEFAULT '{}',
        updated_at REAL NOT NULL
    );
    """,
    # 2: the writer of a streaming answer (its window's token, writers.py), so that a second
    # window's start-up recovery leaves an answer another live window is writing alone; and
    # which workbench applied each step, so an older build can say which version a file needs.
    """
    ALTER TABLE messages ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE schema_version ADD COLUMN app_version TEXT NOT NULL DEFAULT '';
    """,
    # 3: the system prompt and sampling settings a conversation was last used with (JSON, by
    # setting name); '{}' for one that has none of its own and follows the global settings.
    """
    ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
    """,
    # 4: the per-token drop counters (cache-aware expert dropping); -1 = dropping was off.
    """
    ALTER TABLE run_tokens ADD COLUMN experts_routed INTEGER NOT NULL DEFAULT -1;
    ALTER TABLE run_tokens ADD COLUMN experts_dropped INTEGER NOT NULL DEFAULT -1;
    """,
    # 5: images attached to messages (images.py): the bytes once per content hash, and which
    # message shows which, in order. The last reference going takes the bytes with it.
    """
    CREATE TABLE images (
        sha256 TEXT PRIMARY KEY,
        data BLOB NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    );
    CREATE TABLE message_images (
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        sha256 TEXT NOT NULL REFERENCES images(sha256),
        name TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (message_id, position)
    );  -- with rowids: salvage.py walks a damaged table by rowid
    CREATE INDEX message_images_sha ON message_images(sha256);
    CREATE TRIGGER images_unreferenced AFTER DELETE ON message_images
    WHEN NOT EXISTS (SELECT 1 FROM message_images WHERE sha256 = OLD.sha256)
    BEGIN
        DELETE FROM images WHERE sha256 = OLD.sha256;
    END;
    """,
    # 6: the per-token speculation columns (engine/speculation); -1 = speculation was off.
    """
    ALTER TABLE run_tokens ADD COLUMN drafted INTEGER NOT NULL DEFAULT -1;
    ALTER TABLE run_tokens ADD COLUMN draft_len INTEGER NOT NULL DEFAULT -1;
    ALTER TABLE run_tokens ADD COLUMN draft_kept INTEGER NOT NULL DEFAULT -1;
    """,
    # 7: the per-token substitution counters (cache-aware substitution); -1 = it was off.
    """
    ALTER TABLE run_tokens ADD COLUMN experts_reranked INTEGER NOT NULL DEFAULT -1;
    ALTER TABLE run_tokens ADD COLUMN experts_substituted INTEGER NOT NULL DEFAULT -1;
    """,
    # 8: a scored run's quality figures (bench/quality.py: perplexity, KL, agreement with their
    # intervals, the reference's settings, the per-position series); '{}' for a run that was
    # not scored, which every run before this step was.
    """
    ALTER TABLE runs ADD COLUMN quality TEXT NOT NULL DEFAULT '{}';
    """,
    # 9: a grammar's time per token (structured output, tool calls); -1 = no grammar ran.
    """
    ALTER TABLE run_tokens ADD COLUMN grammar_ms REAL NOT NULL DEFAULT -1;
    """,
    # 10: tool calls as turns (ui/chat/tool_turns.py): an answer keeps the calls it made
    # (`tool_calls`, OpenAI's JSON), and a 'tool' message is a call's result (`tool_call_id`,
    # `tool_name`). The role CHECK cannot be altered, so the table is rebuilt: with foreign
    # keys off (REBUILD), or dropping the old table would cascade into message_images and set
    # runs' and conversations' references to NULL. The rows keep their ids; indexes come back;
    # the search triggers, dropped with the table, are put back by search.ensure_index.
    REBUILD + """
    CREATE TABLE messages_new (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content TEXT NOT NULL DEFAULT '',
        reasoning TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'complete' CHECK (status IN
            ('complete', 'streaming', 'stopped', 'interrupted', 'error', 'rejected')),
        error TEXT NOT NULL DEFAULT '',
        stats TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        owner TEXT NOT NULL DEFAULT '',
        tool_calls TEXT NOT NULL DEFAULT '',
        tool_call_id TEXT NOT NULL DEFAULT '',
        tool_name TEXT NOT NULL DEFAULT ''
    );
    INSERT INTO messages_new (id, conversation_id, parent_id, role, content, reasoning, status,
                              error, stats, created_at, owner)
        SELECT id, conversation_id, parent_id, role, content, reasoning, status, error, stats,
               created_at, owner FROM messages;
    DROP TABLE messages;
    ALTER TABLE messages_new RENAME TO messages;
    CREATE INDEX messages_tree ON messages(conversation_id, parent_id);
    CREATE INDEX messages_parent ON messages(parent_id);
    CREATE INDEX messages_status ON messages(status);
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path | str) -> sqlite3.Connection:
    """Open (creating) the file with the settings every connection needs.

    check_same_thread=False: the worker thread that uses the store may not be the one that
    opened it. The Store is still used from one thread at a time (see store.py).
    isolation_level=None: transactions are explicit (transaction() below), not implicit.
    """
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=5000")  # another process (a second window) may write
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception.

    IMMEDIATE takes the write lock up front, so a second writer waits (busy_timeout) instead of
    failing half-way through.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def statements(script: str) -> list[str]:
    """Split a script into statements; sqlite decides where one ends (triggers hold ';')."""
    out: list[str] = []
    pending = ""
    chunks = script.split(";")
    for i, chunk in enumerate(chunks):
        # Put back the ';' split removed (the last chunk had none after it).
        pending += chunk if i == len(chunks) - 1 else chunk + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                out.append(pending.strip())
            pending = ""
    if any(line.strip() and not line.strip().startswith("--") for line in pending.splitlines()):
        raise ValueError(f"incomplete SQL statement: {pending.strip()[:80]!r}")
    return out


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection, migrations: list[str] | None = None) -> int:
    """Apply the steps the file lacks, each in its own transaction; returns the version.

    Idempotent: a file already at the latest version is left alone.
    """
    steps = MIGRATIONS if migrations is None else migrations
    with transaction(conn):
        version = current_version(conn)
    if version > len(steps):
        _, writer = stored_version(conn)
        file = conn.execute("PRAGMA database_list").fetchone()[2] or ":memory:"
        raise SchemaTooNew(file, version, len(steps), writer)
    for number in range(version + 1, len(steps) + 1):
        script = steps[number - 1]
        if script.startswith(REBUILD):
            _apply_rebuild(conn, number, script)
        else:
            _apply(conn, number, script)
    return len(steps)


def _apply_rebuild(conn: sqlite3.Connection, number: int, script: str) -> None:
    """A rebuilding step with foreign keys off. The pragma is a no-op inside a transaction, so
    it is switched outside one, and back on whatever happens."""
    was_on = bool(conn.execute("PRAGMA foreign_keys").fetchone()[0])
    conn.execute("PRAGMA foreign_keys=OFF")
    try:
        _apply(conn, number, script, check_keys=True)
    finally:
        if was_on:
            conn.execute("PRAGMA foreign_keys=ON")


def _apply(conn: sqlite3.Connection, number: int, script: str,
           check_keys: bool = False) -> None:
    with transaction(conn):
        # Re-read under the write lock: another process may have migrated meanwhile.
        if current_version(conn) >= number:
            return
        # A reference the file had broken already (an old crash, a salvage) is no reason to
        # refuse it; one the step breaks is.
        before = _broken_references(conn) if check_keys else set()
        for statement in statements(script):
            conn.execute(statement)
        if check_keys and (broken := list(_broken_references(conn) - before)):
            table, rowid, parent = broken[0][:3]
            raise sqlite3.IntegrityError(f"step {number} would break a reference: row {rowid} "
                                         f"of {table} -> {parent}")
        columns = {r[1] for r in conn.execute("PRAGMA table_info(schema_version)")}
        if "app_version" in columns:
            conn.execute(
                "INSERT INTO schema_version (version, applied_at, app_version)"
                " VALUES (?, ?, ?)", (number, time.time(), __version__))
        else:
            conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                         (number, time.time()))
        # Also in the header, where any SQLite tool (and a future build) can see it.
        conn.execute(f"PRAGMA user_version = {int(number)}")


def _broken_references(conn: sqlite3.Connection) -> set[tuple[object, ...]]:
    return {tuple(r) for r in conn.execute("PRAGMA foreign_key_check")}
