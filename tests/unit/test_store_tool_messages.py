"""Tool calls in the store (issue #36): step 10 rebuilds `messages` so that it takes role 'tool'
and the call columns, and a file made before it keeps every row and every reference."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from workbench.store import Store
from workbench.store.schema import MIGRATIONS, REBUILD, connect, migrate

TOOLS_STEP = 10  # the step that rebuilt messages


def _old_file(path: Path) -> None:
    """A file at the step before tool calls: a conversation of three messages (a branch), an
    image on the first, a run on the answer, the answer as the active leaf."""
    conn = connect(path)
    migrate(conn, MIGRATIONS[:TOOLS_STEP - 1])
    conn.executescript("""
        INSERT INTO conversations (id, title, created_at, updated_at) VALUES (1, 'old', 1, 1);
        INSERT INTO messages (id, conversation_id, parent_id, role, content, stats, created_at)
            VALUES (1, 1, NULL, 'user', 'why is the sky blue', '{}', 1),
                   (2, 1, 1, 'assistant', 'Rayleigh scattering', '{"n_gen": 3}', 2),
                   (3, 1, 1, 'assistant', 'an older version', '{}', 1.5);
        INSERT INTO images (sha256, data, name, created_at) VALUES ('abc', x'0102', 'p.png', 1);
        INSERT INTO message_images (message_id, position, sha256, name)
            VALUES (1, 0, 'abc', 'p.png');
        INSERT INTO runs (id, message_id, created_at) VALUES (7, 2, 2);
        UPDATE conversations SET active_leaf_id = 2 WHERE id = 1;
    """)
    conn.close()


def _rows(path: Path) -> dict[str, list[tuple]]:
    with sqlite3.connect(path) as conn:
        return {
            "messages": conn.execute(
                "SELECT id, conversation_id, parent_id, role, content, stats, created_at"
                " FROM messages ORDER BY id").fetchall(),
            "message_images": conn.execute("SELECT * FROM message_images").fetchall(),
            "images": conn.execute("SELECT sha256, data FROM images").fetchall(),
            "runs": conn.execute("SELECT id, message_id FROM runs").fetchall(),
            "leaf": conn.execute("SELECT active_leaf_id FROM conversations").fetchall(),
        }


def test_the_step_is_a_rebuild_with_foreign_keys_off():
    assert MIGRATIONS[TOOLS_STEP - 1].startswith(REBUILD)


def test_an_old_file_keeps_its_messages_images_runs_and_leaf(tmp_path: Path):
    path = tmp_path / "old.db"
    _old_file(path)
    before = _rows(path)
    assert before["message_images"] and before["runs"] == [(7, 2)]
    with Store.open(path) as store:
        assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # back on
        path_shown = store.active_path(1)
        assert [m.content for m in path_shown] == ["why is the sky blue", "Rayleigh scattering"]
        assert store.message_images([1])[1][0].data == b"\x01\x02"
        assert [h.message_id for h in store.search("Rayleigh")] == [2]  # the index rebuilt
        assert store.siblings(2).count == 2
    # Nothing cascaded (a DROP TABLE with foreign keys on deletes message_images' rows and sets
    # runs.message_id and conversations.active_leaf_id to NULL).
    assert _rows(path) == before


def test_a_rebuild_that_would_break_a_reference_is_rolled_back(tmp_path: Path):
    path = tmp_path / "old.db"
    _old_file(path)
    broken = REBUILD + "DELETE FROM messages WHERE id = 1;"
    conn = connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="would break a reference"):
        migrate(conn, [*MIGRATIONS[:TOOLS_STEP - 1], broken])
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 3
    conn.close()


def test_an_answers_calls_and_a_tools_result_are_kept(tmp_path: Path):
    calls = '[{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]'
    with Store.open(tmp_path / "w.db") as store:
        cid = store.create_conversation("tools").id
        user = store.add_message(cid, None, "user", "call f")
        answer = store.add_message(cid, user.id, "assistant", status="streaming")
        store.update_message(answer.id, content="", status="complete", tool_calls=calls)
        result = store.add_message(cid, answer.id, "tool", "42", tool_call_id="call_1",
                                   tool_name="f")
    with Store.open(tmp_path / "w.db") as store:
        path = store.active_path(cid)
    assert [m.role for m in path] == ["user", "assistant", "tool"]
    assert path[1].tool_calls == calls and path[0].tool_calls == ""
    assert (path[2].id, path[2].content, path[2].tool_call_id, path[2].tool_name) == (
        result.id, "42", "call_1", "f")
    # An export carries them, and an import takes them back.
    with Store.open(tmp_path / "w.db") as store:
        copy = store.import_json(store.export_json(cid))
        again = store.active_path(copy.id)
    assert [(m.role, m.tool_calls, m.tool_call_id, m.tool_name) for m in again] == [
        (m.role, m.tool_calls, m.tool_call_id, m.tool_name) for m in path]
