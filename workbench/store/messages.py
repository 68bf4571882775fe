"""Messages as a tree: edits and regenerations add siblings, nothing is erased.

Each conversation remembers its active leaf; the conversation on screen is the path from the
root to that leaf. Streaming answers are written with update_message, which the caller
throttles (about once a second, and once at the end); recover_interrupted marks what a crash
left half-written.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Sequence

from workbench.store.conversations import fetch_conversation
from workbench.store.images import StoredImage, images_of, insert_images
from workbench.store.message_stats import MessageStats
from workbench.store.records import ROLES, STATUSES, Message, NotFound, Siblings
from workbench.store.schema import transaction

MESSAGE_COLUMNS = (
    "id, conversation_id, parent_id, role, content, reasoning, status, error, stats, created_at,"
    " tool_calls, tool_call_id, tool_name"
)


def message_from_row(row: sqlite3.Row) -> Message:
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        parent_id=row["parent_id"],
        role=row["role"],
        content=row["content"],
        reasoning=row["reasoning"],
        status=row["status"],
        error=row["error"],
        stats=MessageStats.from_json(json.loads(row["stats"])),
        created_at=row["created_at"],
        tool_calls=row["tool_calls"],
        tool_call_id=row["tool_call_id"],
        tool_name=row["tool_name"],
    )


def fetch_message(conn: sqlite3.Connection, message_id: int) -> Message:
    row = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
    ).fetchone()
    if row is None:
        raise NotFound(f"no message {message_id}")
    return message_from_row(row)


def check_words(role: str | None = None, status: str | None = None) -> None:
    if role is not None and role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {ROLES}")
    if status is not None and status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {STATUSES}")


def insert_message(
    conn: sqlite3.Connection,
    conversation_id: int,
    parent_id: int | None,
    role: str,
    content: str,
    reasoning: str,
    status: str,
    error: str,
    stats: MessageStats | None,
    created_at: float,
    owner: str = "",
    tool: tuple[str, str, str] = ("", "", ""),
) -> int:
    """One INSERT, no checks beyond the schema's (export.py's import reuses it).

    owner: the writer token of the Store that streams into it (writers.py); "" for none.
    tool: (tool_calls, tool_call_id, tool_name), records.Message says what each holds."""
    cur = conn.execute(
        "INSERT INTO messages (conversation_id, parent_id, role, content, reasoning, status,"
        " error, stats, created_at, owner, tool_calls, tool_call_id, tool_name)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (conversation_id, parent_id, role, content, reasoning, status, error,
         json.dumps((stats or MessageStats()).to_json()), created_at, owner, *tool),
    )
    return int(cur.lastrowid or 0)


def newest_leaf_under(conn: sqlite3.Connection, message_id: int) -> int:
    """The most recently created leaf among the message and its descendants."""
    row = conn.execute(
        """
        WITH RECURSIVE sub(id) AS (
            SELECT ? UNION ALL SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id
        )
        SELECT m.id FROM messages m JOIN sub ON m.id = sub.id
        WHERE NOT EXISTS (SELECT 1 FROM messages c WHERE c.parent_id = m.id)
        ORDER BY m.created_at DESC, m.id DESC LIMIT 1
        """,
        (message_id,),
    ).fetchone()
    return int(row[0])


def all_messages(conn: sqlite3.Connection, conversation_id: int) -> list[Message]:
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ?"
        " ORDER BY created_at, id", (conversation_id,)
    ).fetchall()
    return [message_from_row(r) for r in rows]


_M_COLUMNS = ", ".join("m." + c.strip() for c in MESSAGE_COLUMNS.split(","))


def path_to(conn: sqlite3.Connection, message_id: int) -> list[Message]:
    rows = conn.execute(
        f"""
        WITH RECURSIVE up(id, parent_id, depth) AS (
            SELECT id, parent_id, 0 FROM messages WHERE id = ?
            UNION ALL
            SELECT m.id, m.parent_id, up.depth + 1 FROM messages m JOIN up ON m.id = up.parent_id
        )
        SELECT {_M_COLUMNS} FROM messages m JOIN up ON m.id = up.id ORDER BY up.depth DESC
        """,
        (message_id,),
    ).fetchall()
    if not rows:
        raise NotFound(f"no message {message_id}")
    return [message_from_row(r) for r in rows]


def active_path(conn: sqlite3.Connection, conversation_id: int) -> list[Message]:
    leaf = fetch_conversation(conn, conversation_id).active_leaf_id
    return [] if leaf is None else path_to(conn, leaf)


def mark_interrupted(conn: sqlite3.Connection, alive: Collection[str] = ()) -> int:
    """Mark the messages left "streaming" as "interrupted", except those whose owner is in
    `alive` (writers that still hold their lock: their answers are being written now)."""
    keep = sorted(set(alive) - {""})
    sql = "UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'"
    if keep:
        sql += f" AND owner NOT IN ({', '.join('?' * len(keep))})"
    with transaction(conn):
        return conn.execute(sql, keep).rowcount


class MessageOps:
    _db: sqlite3.Connection
    _owner: str = ""  # this store's writer token, recorded on the answers it streams

    def add_message(
        self,
        conversation_id: int,
        parent_id: int | None,
        role: str,
        content: str = "",
        *,
        reasoning: str = "",
        status: str = "complete",
        stats: MessageStats | None = None,
        error: str = "",
        created_at: float | None = None,
        images: Sequence[StoredImage] = (),
        tool_call_id: str = "",
        tool_name: str = "",
    ) -> Message:
        """Append a message under `parent_id` (None: a new root) and make it the active leaf.
        `images` are attached to it in the same transaction (store/images.py). A 'tool'
        message names the call it answers (`tool_call_id`, `tool_name`).

        For a streaming answer pass status="streaming" and fill it with update_message.
        """
        check_words(role, status)
        now = time.time() if created_at is None else created_at
        with transaction(self._db):
            fetch_conversation(self._db, conversation_id)  # NotFound rather than a FK error
            if parent_id is not None:
                parent = fetch_message(self._db, parent_id)
                if parent.conversation_id != conversation_id:
                    raise ValueError(
                        f"message {parent_id} belongs to conversation {parent.conversation_id},"
                        f" not {conversation_id}"
                    )
            new_id = insert_message(self._db, conversation_id, parent_id, role, content,
                                    reasoning, status, error, stats, now,
                                    self._owner if status == "streaming" else "",
                                    ("", tool_call_id, tool_name))
            insert_images(self._db, new_id, images)
            self._set_leaf(conversation_id, new_id, touch=now)
            return fetch_message(self._db, new_id)

    def edit_message(self, message_id: int, content: str) -> Message:
        """An edited copy of the message as its new sibling (same parent, same role), active.

        The original and everything under it stay, one arrow away.
        """
        old = fetch_message(self._db, message_id)
        # The copy keeps the original's images: an edit changes the words, not the pictures.
        images = images_of(self._db, [message_id]).get(message_id, [])
        return self.add_message(old.conversation_id, old.parent_id, old.role, content,
                                images=images)

    def regenerate(self, message_id: int) -> Message:
        """An empty "streaming" sibling of an answer, active, for the new generation to fill."""
        old = fetch_message(self._db, message_id)
        return self.add_message(old.conversation_id, old.parent_id, old.role, status="streaming")

    def update_message(
        self,
        message_id: int,
        *,
        content: str | None = None,
        reasoning: str | None = None,
        status: str | None = None,
        stats: MessageStats | None = None,
        error: str | None = None,
        tool_calls: str | None = None,
    ) -> None:
        """Overwrite the given fields (others unchanged) and commit. `tool_calls`: the calls
        an answer made (JSON text, engine/tools/turn.calls_json).

        Streaming: call at most about once a second with the whole text so far, then once at
        the end with the final status. Each call is its own commit, so a crash keeps the last.
        """
        check_words(status=status)
        changes: dict[str, object] = {}
        for name, value in (("content", content), ("reasoning", reasoning),
                            ("status", status), ("error", error), ("tool_calls", tool_calls)):
            if value is not None:
                changes[name] = value
        if stats is not None:
            changes["stats"] = json.dumps(stats.to_json())
        if not changes:
            return
        assignments = ", ".join(f"{name} = ?" for name in changes)
        with transaction(self._db):
            cur = self._db.execute(
                f"UPDATE messages SET {assignments} WHERE id = ?", (*changes.values(), message_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no message {message_id}")

    def recover_interrupted(self) -> int:
        """Mark every message left "streaming" by a writer that is gone (a crash, a kill) as
        "interrupted"; answers a live writer is streaming stay. Returns how many were marked.

        Store.open does it unless told not to; Store knows which writers live (writers.py).
        """
        return mark_interrupted(self._db, self._live_owners())

    def _live_owners(self) -> set[str]:
        return {self._owner} if self._owner else set()

    def get_message(self, message_id: int) -> Message:
        return fetch_message(self._db, message_id)

    def children(self, message_id: int) -> list[Message]:
        rows = self._db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE parent_id = ?"
            " ORDER BY created_at, id", (message_id,)
        ).fetchall()
        return [message_from_row(r) for r in rows]

    def all_messages(self, conversation_id: int) -> list[Message]:
        """The whole tree, every branch, oldest first."""
        return all_messages(self._db, conversation_id)

    def path_to(self, message_id: int) -> list[Message]:
        """Root .. message, following parents."""
        return path_to(self._db, message_id)

    def active_path(self, conversation_id: int) -> list[Message]:
        """The branch on screen: root .. active leaf ([] for an empty conversation)."""
        return active_path(self._db, conversation_id)

    def siblings(self, message_id: int) -> Siblings:
        """The message among its versions (same parent), oldest first; roots are siblings of
        the conversation's other roots."""
        msg = fetch_message(self._db, message_id)
        rows = self._db.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND parent_id IS ?"
            " ORDER BY created_at, id",
            (msg.conversation_id, msg.parent_id),
        ).fetchall()
        messages = [message_from_row(r) for r in rows]
        index = next(i for i, m in enumerate(messages) if m.id == message_id)
        return Siblings(messages=messages, index=index)

    def switch_branch(self, message_id: int) -> list[Message]:
        """Show the branch through `message_id` (usually a sibling picked with the arrows):
        the active leaf becomes the newest leaf under it. Returns the new active path."""
        msg = fetch_message(self._db, message_id)
        with transaction(self._db):
            leaf = newest_leaf_under(self._db, message_id)
            self._set_leaf(msg.conversation_id, leaf)
        return path_to(self._db, leaf)

    def set_active_leaf(self, conversation_id: int, message_id: int) -> None:
        """Make exactly this message the active leaf (it need not be a leaf of the tree)."""
        msg = fetch_message(self._db, message_id)
        if msg.conversation_id != conversation_id:
            raise ValueError(f"message {message_id} is not in conversation {conversation_id}")
        with transaction(self._db):
            self._set_leaf(conversation_id, message_id)

    def _set_leaf(self, conversation_id: int, leaf_id: int, touch: float | None = None) -> None:
        """Point the conversation at `leaf_id`; `touch` also sets updated_at (new activity)."""
        cur = self._db.execute(
            "UPDATE conversations SET active_leaf_id = ?, updated_at = COALESCE(?, updated_at)"
            " WHERE id = ?",
            (leaf_id, touch, conversation_id),
        )
        if cur.rowcount == 0:
            raise NotFound(f"no conversation {conversation_id}")
