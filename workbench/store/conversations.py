"""Conversations: create, rename, list, and delete with undo (a soft delete, purged later); each
one's own settings, and the check a settings value from a file (an import, a salvage) passes."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from typing import Any

from workbench.config import BY_NAME, CONVERSATION_SETTINGS, range_problem, range_text, type_ok
from workbench.store.records import Conversation, NotFound
from workbench.store.schema import transaction

CONVERSATION_COLUMNS = "id, title, created_at, updated_at, active_leaf_id, deleted_at"

# The settings that are a conversation's own, as the config tree declares them (the window
# applies them: ui/chat/conversation_settings.py takes its KEYS from here).
SETTING_KEYS: frozenset[str] = frozenset(CONVERSATION_SETTINGS)
_KINDS = {"int": "a whole number", "float": "a number", "bool": "true or false"}


def parsed_settings(text: object) -> dict[str, Any]:
    """The JSON object a settings column holds; {} for anything else (another program's or a
    damaged file's value), which the caller treats as "no settings of its own"."""
    try:
        value = json.loads(text)  # type: ignore[arg-type]  # a damaged file's value: anything
    except (TypeError, ValueError, RecursionError):  # NULL, a number, not UTF-8, not JSON
        return {}
    return value if isinstance(value, dict) else {}


def checked_settings(value: object) -> tuple[dict[str, Any], list[str]]:
    """The entries of an untrusted settings value that are a conversation's and valid, and one
    line for each entry left out (what it was and why). Each entry stands alone: a bad one
    costs only itself; the others are kept."""
    if not isinstance(value, Mapping):
        return {}, [f"settings {value!r:.60} are not an object of setting names; left out"]
    own: dict[str, Any] = {}
    problems: list[str] = []
    for key, item in value.items():
        if problem := _entry_problem(key, item):
            problems.append(f"setting {problem}; left out")
        else:
            own[key] = item
    return own, problems


def _entry_problem(key: object, item: object) -> str:
    if key not in SETTING_KEYS:
        return f"{key!r:.40} is not a conversation's setting"
    s = BY_NAME[str(key)]
    if not type_ok(s, item):
        return f"{key} is {item!r:.40}, not {_KINDS.get(s.type, 'text')}"
    # The range whether or not the setting is in use now: with the global settings under it,
    # a value greedy decoding ignores here may be used, and validate() would then refuse the
    # conversation's settings whole (ui/chat/conversation_settings.config_for).
    if range_problem(s, item):
        return f"{key} is {item!r:.40}, and its range is {range_text(s)}"
    return ""


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


def fetch_settings(conn: sqlite3.Connection, conversation_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT settings FROM conversations WHERE id = ?",
                       (conversation_id,)).fetchone()
    if row is None:
        raise NotFound(f"no conversation {conversation_id}")
    return parsed_settings(row["settings"])


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
        return fetch_settings(self._db, conversation_id)

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
