"""Conversations: create, rename, list, and delete with undo (a soft delete, purged later)."""

from __future__ import annotations

import json
import sqlite3
import time

from workbench.store.records import Conversation, NotFound
from workbench.store.schema import transaction

CONVERSATION_COLUMNS = "id, title, created_at, updated_at, active_leaf_id, deleted_at"


def conversation_from_row(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=row["id"],
        title=row["title"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        active_leaf_id=row["active_leaf_id"],
        deleted_at=row["deleted_at"],
    )


def fetch_conversation(conn: sqlite3.Connection, conversation_id: int) -> Conversation:
    row = conn.execute(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise NotFound(f"no conversation {conversation_id}")
    return conversation_from_row(row)


class ConversationOps:
    _db: sqlite3.Connection

    def create_conversation(self, title: str = "", *, created_at: float | None = None
                            ) -> Conversation:
        now = time.time() if created_at is None else created_at
        with transaction(self._db):
            cur = self._db.execute(
                "INSERT INTO conversations (title, created_at, updated_at) VALUES (?, ?, ?)",
                (title, now, now),
            )
            return fetch_conversation(self._db, int(cur.lastrowid or 0))

    def get_conversation(self, conversation_id: int) -> Conversation:
        """The conversation, deleted or not (NotFound once purged)."""
        return fetch_conversation(self._db, conversation_id)

    def rename_conversation(self, conversation_id: int, title: str) -> Conversation:
        with transaction(self._db):
            self._touch(conversation_id, "title = ?", (title,))
            return fetch_conversation(self._db, conversation_id)

    def conversation_settings(self, conversation_id: int) -> dict[str, object]:
        """The settings the conversation was last used with ({} when it has none of its own;
        also for a value that is not a JSON object, which only another program could write)."""
        row = self._db.execute("SELECT settings FROM conversations WHERE id = ?",
                               (conversation_id,)).fetchone()
        if row is None:
            raise NotFound(f"no conversation {conversation_id}")
        try:
            value = json.loads(row["settings"])
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def set_conversation_settings(self, conversation_id: int,
                                  settings: dict[str, object]) -> None:
        """Not a touch: using a conversation's settings does not reorder the list."""
        with transaction(self._db):
            self._set(conversation_id, "settings = ?", (json.dumps(settings, sort_keys=True),))

    def list_conversations(self, *, include_deleted: bool = False) -> list[Conversation]:
        """Newest activity first; soft-deleted ones only when asked."""
        where = "" if include_deleted else "WHERE deleted_at IS NULL"
        rows = self._db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations {where}"
            " ORDER BY updated_at DESC, id DESC"
        ).fetchall()
        return [conversation_from_row(r) for r in rows]

    def list_deleted(self) -> list[Conversation]:
        """Soft-deleted conversations, most recently deleted first (an undo list)."""
        rows = self._db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE deleted_at IS NOT NULL"
            " ORDER BY deleted_at DESC, id DESC"
        ).fetchall()
        return [conversation_from_row(r) for r in rows]

    def delete_conversation(self, conversation_id: int) -> None:
        """Hide it from lists and search; undo_delete brings it back until it is purged."""
        with transaction(self._db):
            self._set(conversation_id, "deleted_at = ?", (time.time(),))

    def undo_delete(self, conversation_id: int) -> Conversation:
        with transaction(self._db):
            self._set(conversation_id, "deleted_at = NULL", ())
            return fetch_conversation(self._db, conversation_id)

    def purge_deleted(self, older_than: float = 0.0) -> int:
        """Erase conversations deleted at least `older_than` seconds ago, with their messages
        (runs stay, detached). Returns how many were erased."""
        cutoff = time.time() - older_than
        with transaction(self._db):
            cur = self._db.execute(
                "DELETE FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at <= ?",
                (cutoff,),
            )
            return cur.rowcount

    def _set(self, conversation_id: int, assignment: str, params: tuple[object, ...]) -> None:
        cur = self._db.execute(
            f"UPDATE conversations SET {assignment} WHERE id = ?", (*params, conversation_id)
        )
        if cur.rowcount == 0:
            raise NotFound(f"no conversation {conversation_id}")

    def _touch(self, conversation_id: int, assignment: str, params: tuple[object, ...]) -> None:
        """Set columns and mark the conversation as just used (it moves to the top of lists)."""
        self._set(conversation_id, f"{assignment}, updated_at = ?", (*params, time.time()))
