"""Search conversations by title and message text: FTS5 when this sqlite has it, else LIKE.

The full-text index is kept by triggers on `messages.content`, outside the numbered migrations
because it depends on the sqlite build: ensure_index creates (or, without FTS5, disables) it on
every open. A streaming update re-indexes the message once per write, about once a second.
"""

from __future__ import annotations

import re
import sqlite3

from workbench.store.conversations import CONVERSATION_COLUMNS, conversation_from_row
from workbench.store.records import SearchHit
from workbench.store.schema import transaction

MARK_START, MARK_END = "\x02", "\x03"  # FTS snippet markers, turned into spans
ELLIPSIS = "…"

_TRIGGERS = {
    "messages_fts_insert": """
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        END""",
    "messages_fts_delete": """
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
        END""",
    "messages_fts_update": """
        CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
            INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        END""",
}


def fts5_available(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp.fts5_probe")
    return True


def ensure_index(conn: sqlite3.Connection, use_fts: bool | None = None) -> bool:
    """Create the message index and its triggers where missing; returns whether FTS is used.

    Without FTS5 the triggers are dropped (they would make every message write fail), and a
    later open with FTS5 rebuilds the then stale index.
    """
    if use_fts is None:
        use_fts = fts5_available(conn)
    with transaction(conn):
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if not use_fts:
            for trigger in _TRIGGERS:
                conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
            return False
        stale = False
        if "messages_fts" not in names:
            conn.execute(
                "CREATE VIRTUAL TABLE messages_fts USING fts5("
                "content, content='messages', content_rowid='id')"
            )
            stale = True
        for trigger, sql in _TRIGGERS.items():
            if trigger not in names:
                conn.execute(sql)
                stale = True
        if stale:
            conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')")
    return True


def fts_query(words: list[str]) -> str:
    """Every word must occur, each as a prefix ("stream" finds "streaming"); quoting keeps the
    user's text from being read as FTS syntax."""
    return " ".join('"' + w.replace('"', '""') + '"*' for w in words)


def marked_to_spans(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """Strip the FTS markers, returning the plain text and the [start, end) of each match."""
    plain: list[str] = []
    spans: list[tuple[int, int]] = []
    start = 0
    pos = 0
    for ch in marked:
        if ch == MARK_START:
            start = pos
        elif ch == MARK_END:
            spans.append((start, pos))
        else:
            plain.append(ch)
            pos += 1
    return "".join(plain), spans


def make_snippet(text: str, words: list[str], width: int = 80) -> tuple[str, list[tuple[int, int]]]:
    """A window of about `width` characters around the first match, with every match's span."""
    flat = " ".join(text.split())
    folded = flat.casefold()
    hits = [folded.find(w.casefold()) for w in words]
    first = min((h for h in hits if h >= 0), default=0)
    lo = max(0, first - width // 3)
    hi = min(len(flat), lo + width)
    window = flat[lo:hi]
    prefix = ELLIPSIS if lo > 0 else ""
    snippet = prefix + window + (ELLIPSIS if hi < len(flat) else "")
    spans: list[tuple[int, int]] = []
    low_window = window.casefold()
    for w in words:
        for m in re.finditer(re.escape(w.casefold()), low_window):
            spans.append((m.start() + len(prefix), m.end() + len(prefix)))
    return snippet, sorted(spans)


def _like(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class SearchOps:
    _db: sqlite3.Connection
    _fts: bool

    def search(self, text: str, limit: int = 50) -> list[SearchHit]:
        """Conversations (not deleted) whose title or any message (any branch) holds every
        word of `text`; title matches first, then the best message match, one hit per
        conversation."""
        words = text.split()
        if not words:
            return []
        hits: dict[int, SearchHit] = {}
        for hit in self._title_hits(words):
            hits.setdefault(hit.conversation.id, hit)
        for hit in self._message_hits(words, limit):
            hits.setdefault(hit.conversation.id, hit)
        return list(hits.values())[:limit]

    def _title_hits(self, words: list[str]) -> list[SearchHit]:
        where = " AND ".join("title LIKE ? ESCAPE '\\'" for _ in words)
        rows = self._db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations"
            f" WHERE deleted_at IS NULL AND {where} ORDER BY updated_at DESC, id DESC",
            [_like(w) for w in words],
        ).fetchall()
        out = []
        for row in rows:
            snippet, spans = make_snippet(row["title"], words)
            out.append(SearchHit(conversation_from_row(row), None, snippet, spans))
        return out

    def _message_hits(self, words: list[str], limit: int) -> list[SearchHit]:
        cols = ", ".join("c." + c.strip() for c in CONVERSATION_COLUMNS.split(","))
        if self._fts:
            try:
                rows = self._db.execute(
                    f"SELECT {cols}, m.id AS message_id,"
                    " snippet(messages_fts, 0, ?, ?, ?, 16) AS marked"
                    " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
                    " JOIN conversations c ON c.id = m.conversation_id"
                    " WHERE messages_fts MATCH ? AND c.deleted_at IS NULL"
                    " ORDER BY bm25(messages_fts) LIMIT ?",
                    (MARK_START, MARK_END, ELLIPSIS, fts_query(words), limit * 4),
                ).fetchall()
            except sqlite3.OperationalError:
                rows = None  # a query FTS cannot parse (e.g. only punctuation): use LIKE
            if rows is not None:
                out = []
                for row in rows:
                    # Newlines flattened first so the spans index the text as shown.
                    snippet, spans = marked_to_spans(" ".join(row["marked"].split()))
                    out.append(SearchHit(conversation_from_row(row), row["message_id"],
                                         snippet, spans))
                return out
        where = " AND ".join("m.content LIKE ? ESCAPE '\\'" for _ in words)
        rows = self._db.execute(
            f"SELECT {cols}, m.id AS message_id, m.content FROM messages m"
            f" JOIN conversations c ON c.id = m.conversation_id"
            f" WHERE c.deleted_at IS NULL AND {where}"
            f" ORDER BY c.updated_at DESC, m.created_at, m.id LIMIT ?",
            [*(_like(w) for w in words), limit * 4],
        ).fetchall()
        out = []
        for row in rows:
            snippet, spans = make_snippet(row["content"], words)
            out.append(SearchHit(conversation_from_row(row), row["message_id"], snippet, spans))
        return out
