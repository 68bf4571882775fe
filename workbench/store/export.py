"""Export a conversation to Markdown (the branch on screen) or JSON (the whole tree), and import
the JSON back as a new conversation.

The JSON numbers messages 1..n within the file (parents first), so exporting an imported
conversation gives the same document although the database ids are new. Keys added to format
version 1 since are optional, and a reader that does not know them passes over them: a message's
`images`, the conversation's own `settings` (system prompt and sampler, by setting name).
"""

from __future__ import annotations

import heapq
import json
import sqlite3
import time
from collections.abc import Mapping
from typing import Any

from workbench.store.conversations import checked_settings, fetch_conversation, fetch_settings
from workbench.store.images import (
    StoredImage,
    images_from_json,
    images_of,
    images_to_json,
    insert_images,
)
from workbench.store.message_stats import MessageStats
from workbench.store.messages import active_path, all_messages, check_words, insert_message
from workbench.store.records import Conversation, Imported, JsonDict, Message
from workbench.store.runs import insert_run
from workbench.store.schema import transaction
from workbench.store.stats_line import format_stats_line

FORMAT = "workbench.conversation"
FORMAT_VERSION = 1
_MESSAGE_KEYS = ("role", "content", "reasoning", "status", "error", "stats", "created_at")
# An answer's calls and a tool result's call (schema step 10): written only where set, so a
# conversation without tools exports as before.
_TOOL_KEYS = ("tool_calls", "tool_call_id", "tool_name")
_RUN_KEYS = ("created_at", "label", "engine_version", "model", "settings", "info", "summary")
_STATUS_NOTES = {"stopped": "stopped", "interrupted": "interrupted", "rejected": "rejected",
                 "streaming": "still streaming when exported", "error": "error"}


def parents_first(messages: list[Message]) -> list[Message]:
    """Oldest first, but never a child before its parent (clocks can step back)."""
    children: dict[int | None, list[Message]] = {}
    for m in messages:
        children.setdefault(m.parent_id, []).append(m)
    ready = [((m.created_at, m.id), m) for m in children.get(None, [])]
    heapq.heapify(ready)
    out: list[Message] = []
    while ready:
        _, m = heapq.heappop(ready)
        out.append(m)
        for child in children.get(m.id, []):
            heapq.heappush(ready, ((child.created_at, child.id), child))
    if len(out) != len(messages):
        raise ValueError("message tree has a missing parent")
    return out


def message_markdown(m: Message, images: list[StoredImage] | None = None) -> str:
    parts = [f"## {m.role.capitalize()}"]
    if images:  # Markdown is text: the images are named here and carried by the JSON export
        names = ", ".join(i.name or i.sha256[:12] for i in images)
        parts.append(f"*({len(images)} image{'s' * (len(images) != 1)} attached: {names})*")
    if m.reasoning:
        think_s = m.stats.think_s
        summary = (f"Thought for {think_s:.1f} s" if think_s is not None and think_s >= 0
                   else "Reasoning")
        parts.append(f"<details>\n<summary>{summary}</summary>\n\n{m.reasoning}\n\n</details>")
    if m.content:
        parts.append(m.content)
    if m.status != "complete":
        note = _STATUS_NOTES.get(m.status, m.status)
        parts.append(f"*({note}: {m.error})*" if m.error else f"*({note})*")
    if line := format_stats_line(m.stats):
        parts.append(f"*{line}*")
    return "\n\n".join(parts)


class ExportOps:
    _db: sqlite3.Connection

    def export_markdown(self, conversation_id: int) -> str:
        """The active branch as Markdown: reasoning in a collapsed <details>, stats in italics."""
        conv = fetch_conversation(self._db, conversation_id)
        blocks = [f"# {conv.title or 'Untitled conversation'}"]
        path = active_path(self._db, conversation_id)
        images = images_of(self._db, (m.id for m in path))
        blocks += [message_markdown(m, images.get(m.id)) for m in path]
        return "\n\n".join(blocks) + "\n"

    def export_tree(self, conversation_id: int) -> JsonDict:
        """The whole conversation (every branch, stats, runs without token rows) as a dict."""
        conv = fetch_conversation(self._db, conversation_id)
        messages = parents_first(all_messages(self._db, conversation_id))
        local = {m.id: n for n, m in enumerate(messages, start=1)}
        images = images_of(self._db, local)
        out_messages = []
        for m in messages:
            d: JsonDict = {"id": local[m.id], "parent": local.get(m.parent_id)}  # type: ignore[arg-type]
            d.update({k: getattr(m, k) for k in _MESSAGE_KEYS})
            d["stats"] = m.stats.to_json()  # as the JSON column holds it; the key keeps its place
            d.update({k: getattr(m, k) for k in _TOOL_KEYS if getattr(m, k)})
            if m.id in images:  # base64 in the document: an export is one self-contained file
                d["images"] = images_to_json(images[m.id])
            out_messages.append(d)
        runs = self._db.execute(
            "SELECT r.* FROM runs r JOIN messages m ON m.id = r.message_id"
            " WHERE m.conversation_id = ? ORDER BY r.created_at, r.id", (conversation_id,)
        ).fetchall()
        out_runs = []
        for r in runs:
            d = {"message": local[r["message_id"]]}
            for k in _RUN_KEYS:
                d[k] = json.loads(r[k]) if k in ("model", "settings", "info", "summary") else r[k]
            out_runs.append(d)
        doc: JsonDict = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "title": conv.title,
            "created_at": conv.created_at,
            "active_leaf": local.get(conv.active_leaf_id),  # type: ignore[arg-type]
        }
        # None of its own (it follows the global settings): no key, the document as before.
        if settings := fetch_settings(self._db, conversation_id):
            doc["settings"] = settings
        return doc | {"messages": out_messages, "runs": out_runs}

    def export_json(self, conversation_id: int) -> str:
        return json.dumps(self.export_tree(conversation_id), ensure_ascii=False, indent=2) + "\n"

    def import_json(self, document: str | Mapping[str, Any]) -> Conversation:
        """Add the exported conversation as a new one (new ids) and return it; see
        import_document, which also says what was left out."""
        return self.import_document(document).conversation

    def import_document(self, document: str | Mapping[str, Any]) -> Imported:
        """Add the exported conversation as a new one (new ids).

        Raises ValueError for a document that is not a conversation export. A message that was
        streaming when exported comes back "interrupted". A conversation setting that is not
        valid is left out (and named in `left_out`): the conversation follows the global
        setting there, and everything else is imported.
        """
        try:
            return self._import(document)
        except (TypeError, AttributeError) as exc:
            # A field of the wrong type deep in the document (a list where a number belongs):
            # the same refusal as any other malformed export, and the transaction added nothing.
            raise ValueError(f"a field has the wrong type ({exc})") from exc

    def _import(self, document: str | Mapping[str, Any]) -> Imported:
        doc = json.loads(document) if isinstance(document, str) else dict(document)
        if doc.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document")
        if not isinstance(doc.get("version"), int) or doc["version"] > FORMAT_VERSION:
            raise ValueError(f"unsupported {FORMAT} version {doc.get('version')!r}")
        messages = doc.get("messages") or []
        settings, left_out = checked_settings(doc.get("settings", {}))
        now = time.time()
        with transaction(self._db):
            cur = self._db.execute(
                "INSERT INTO conversations (title, created_at, updated_at, settings)"
                " VALUES (?, ?, ?, ?)",
                (str(doc.get("title", "")), float(doc.get("created_at", now)), now,
                 json.dumps(settings, sort_keys=True)),
            )
            conversation_id = int(cur.lastrowid or 0)
            ids: dict[int, int] = {}
            for m in messages:
                ids[m["id"]] = self._import_message(conversation_id, m, ids)
            for r in doc.get("runs") or []:
                if r.get("message") not in ids:
                    raise ValueError(f"run refers to unknown message {r.get('message')!r}")
                insert_run(self._db, ids[r["message"]], float(r["created_at"]),
                           str(r.get("label", "")), dict(r.get("settings") or {}),
                           dict(r.get("model") or {}), str(r.get("engine_version", "")),
                           dict(r.get("info") or {}), dict(r.get("summary") or {}))
            leaf = doc.get("active_leaf")
            if leaf is not None:
                if leaf not in ids:
                    raise ValueError(f"active_leaf {leaf!r} is not a message")
                self._db.execute("UPDATE conversations SET active_leaf_id = ? WHERE id = ?",
                                 (ids[leaf], conversation_id))
            return Imported(fetch_conversation(self._db, conversation_id), left_out)

    def _import_message(self, conversation_id: int, m: Mapping[str, Any],
                        ids: dict[int, int]) -> int:
        if not isinstance(m, Mapping):
            raise ValueError(f"malformed message {m!r}")
        try:
            local_id, parent = m["id"], m.get("parent")
            role, status = m["role"], m.get("status", "complete")
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed message {m!r}") from exc
        if local_id in ids:
            raise ValueError(f"message id {local_id} appears twice")
        if parent is not None and parent not in ids:
            raise ValueError(f"message {local_id}: parent {parent!r} not defined before it")
        status = "interrupted" if status == "streaming" else status
        check_words(role, status)
        images = images_from_json(m.get("images"))
        message_id = insert_message(
            self._db, conversation_id, None if parent is None else ids[parent], role,
            str(m.get("content", "")), str(m.get("reasoning", "")), status,
            str(m.get("error", "")), MessageStats.from_json(m.get("stats")),
            float(m.get("created_at", time.time())),
            tool=(str(m.get("tool_calls", "")), str(m.get("tool_call_id", "")),
                  str(m.get("tool_name", ""))),
        )
        insert_images(self._db, message_id, images)
        return message_id
