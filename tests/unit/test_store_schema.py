"""The database file: created and migrated from nothing, re-opened without change, guarded."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from workbench.engine.metrics import TokenMetrics
from workbench.store import SCHEMA_VERSION, SchemaTooNew, Store, default_path
from workbench.store.schema import MIGRATIONS, connect, migrate, statements


def _versions(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_migrates_an_empty_file(tmp_path: Path):
    path = tmp_path / "empty.db"
    path.touch()  # a zero-byte file is a valid, empty SQLite database
    with Store.open(path):
        pass
    assert _versions(path) == list(range(1, SCHEMA_VERSION + 1))
    assert {"conversations", "messages", "runs", "run_tokens", "presets"} <= _tables(path)


def test_creates_missing_directories(tmp_path: Path):
    path = tmp_path / "a" / "b" / "w.db"
    with Store.open(path) as store:
        assert store.path == path
    assert path.exists()


def test_reopen_is_idempotent_and_keeps_data(tmp_path: Path):
    path = tmp_path / "w.db"
    with Store.open(path) as store:
        conv = store.create_conversation("kept")
        store.add_message(conv.id, None, "user", "hello")
    before = _versions(path)
    with Store.open(path) as store:
        assert [c.title for c in store.list_conversations()] == ["kept"]
        assert [m.content for m in store.active_path(conv.id)] == ["hello"]
    assert _versions(path) == before


def test_connection_settings(tmp_path: Path):
    with Store.open(tmp_path / "w.db") as store:
        db = store._db
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with pytest.raises(sqlite3.IntegrityError):  # foreign keys are enforced
            db.execute("INSERT INTO messages (conversation_id, role, created_at) VALUES (99,"
                       " 'user', 0)")


def test_a_later_step_applies_only_itself(tmp_path: Path):
    path = tmp_path / "w.db"
    with Store.open(path) as store:
        store.save_preset("p", {"temp": 0.7})
    conn = connect(path)
    later = [*MIGRATIONS, "CREATE TABLE notes (id INTEGER PRIMARY KEY); -- a; comment\n"]
    assert migrate(conn, later) == SCHEMA_VERSION + 1
    assert migrate(conn, later) == SCHEMA_VERSION + 1  # again: nothing to do
    conn.close()
    assert _versions(path) == list(range(1, SCHEMA_VERSION + 2))
    assert "notes" in _tables(path)
    # This build does not know step N+1: it refuses the file rather than guess.
    with pytest.raises(SchemaTooNew):
        Store.open(path)


def test_a_failing_step_leaves_the_file_as_it_was(tmp_path: Path):
    path = tmp_path / "w.db"
    Store.open(path).close()
    conn = connect(path)
    bad = [*MIGRATIONS, "CREATE TABLE half (x); INSERT INTO no_such_table VALUES (1);"]
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, bad)
    conn.close()
    assert _versions(path) == list(range(1, SCHEMA_VERSION + 1))
    assert "half" not in _tables(path)


def test_statements_keep_trigger_bodies_whole():
    script = """
        CREATE TABLE t (x);  -- one; two
        CREATE TRIGGER tr AFTER INSERT ON t BEGIN
            INSERT INTO t VALUES (1); INSERT INTO t VALUES (';');
        END;
    """
    parts = statements(script)
    assert len(parts) == 2
    assert "CREATE TRIGGER" in parts[1] and parts[1].endswith("END;")
    assert "INSERT INTO t VALUES (';')" in parts[1]
    with pytest.raises(ValueError):
        statements("CREATE TABLE unfinished (x")


def test_default_path_is_in_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(tmp_path / "data"))
    assert default_path() == tmp_path / "data" / "workbench.db"
    with Store.open() as store:
        assert store.path == tmp_path / "data" / "workbench.db"
    assert (tmp_path / "data" / "workbench.db").exists()


def test_token_table_has_every_numeric_token_field(tmp_path: Path):
    """Adding a TokenMetrics field must come with a migration: this test says so."""
    numeric = {f.name for f in dataclasses.fields(TokenMetrics) if f.type in ("int", "float")}
    with Store.open(tmp_path / "w.db") as store:
        cols = {r[1] for r in store._db.execute("PRAGMA table_info(run_tokens)")}
    assert numeric | {"piece", "run_id"} == cols
