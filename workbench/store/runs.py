"""Runs: one per generation, with what produced it and one row per generated token.

Inputs are the engine's dataclasses (RunInfo, RunSummary, TokenMetrics) or dicts with the same
field names; every field is stored under its own name, and unmeasured values keep their -1.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import time
from collections.abc import Iterable, Mapping
from typing import Any

from workbench.engine.metrics import UNMEASURED
from workbench.store.records import JsonDict, NotFound, Run
from workbench.store.schema import transaction

RUN_COLUMNS = ("id, message_id, created_at, label, settings, model, engine_version, info, summary,"
               " quality")


def as_dict(value: object) -> JsonDict:
    """A dataclass (slots or not) or mapping as a plain dict, nested dataclasses included."""
    if value is None:
        return {}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"expected a dataclass or a mapping, got {type(value).__name__}")


def token_columns(conn: sqlite3.Connection) -> list[str]:
    """run_tokens columns other than run_id, in table order (read from the file, so a row
    written by a newer engine with extra fields keeps every field this schema has)."""
    rows = conn.execute("PRAGMA table_info(run_tokens)").fetchall()
    return [r["name"] for r in rows if r["name"] != "run_id"]


def _storable(value: object) -> object:
    """NaN would be stored as NULL (sqlite has no NaN) and fail the whole batch on NOT NULL;
    a NaN measures nothing, so it is stored as unmeasured."""
    return UNMEASURED if isinstance(value, float) and math.isnan(value) else value


def run_from_row(row: sqlite3.Row) -> Run:
    return Run(
        id=row["id"],
        message_id=row["message_id"],
        created_at=row["created_at"],
        label=row["label"],
        settings=json.loads(row["settings"]),
        model=json.loads(row["model"]),
        engine_version=row["engine_version"],
        info=json.loads(row["info"]),
        summary=json.loads(row["summary"]),
        quality=json.loads(row["quality"]),
        n_token_rows=row["n_token_rows"],
        message_status=row["message_status"],
    )


def insert_run(conn: sqlite3.Connection, message_id: int | None, created_at: float, label: str,
               settings: JsonDict, model: JsonDict, engine_version: str, info: JsonDict,
               summary: JsonDict) -> int:
    cur = conn.execute(
        "INSERT INTO runs (message_id, created_at, label, settings, model, engine_version, info,"
        " summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (message_id, created_at, label, json.dumps(settings), json.dumps(model), engine_version,
         json.dumps(info), json.dumps(summary)),
    )
    return int(cur.lastrowid or 0)


_SELECT_RUNS = (
    f"SELECT {', '.join('r.' + c.strip() for c in RUN_COLUMNS.split(','))},"
    " (SELECT COUNT(*) FROM run_tokens t WHERE t.run_id = r.id) AS n_token_rows,"
    " (SELECT m.status FROM messages m WHERE m.id = r.message_id) AS message_status"
    " FROM runs r"
)


class RunOps:
    _db: sqlite3.Connection

    def create_run(
        self,
        info: object,
        *,
        message_id: int | None = None,
        summary: object = None,
        settings: Mapping[str, Any] | None = None,
        label: str = "",
        created_at: float | None = None,
    ) -> Run:
        """Record a run from its RunInfo (or a dict of its fields).

        Settings, model identity and engine version are taken from `info` unless `settings`
        is given. `message_id` is None for a headless run; `summary` may come later
        (finish_run).
        """
        info_d = as_dict(info)
        settings_d = dict(settings) if settings is not None else dict(info_d.get("settings", {}))
        model_d = as_dict(info_d.get("model"))
        now = time.time() if created_at is None else created_at
        with transaction(self._db):
            run_id = insert_run(self._db, message_id, now, label, settings_d, model_d,
                                str(info_d.get("engine_version", "")), info_d, as_dict(summary))
            return self._fetch(run_id)

    def finish_run(self, run_id: int, summary: object) -> None:
        """Store the RunSummary (or dict) once the generation ends (replacing any earlier)."""
        self._update(run_id, "summary = ?", (json.dumps(as_dict(summary)),))

    def set_quality(self, run_id: int, quality: Mapping[str, Any]) -> None:
        """Store a scored run's quality figures (bench/quality.py's QualityReport.quality_record),
        replacing any earlier."""
        self._update(run_id, "quality = ?", (json.dumps(dict(quality)),))

    def attach_run(self, run_id: int, message_id: int | None) -> None:
        """Link a run to the message it produced (or detach it with None)."""
        self._update(run_id, "message_id = ?", (message_id,))

    def delete_run(self, run_id: int) -> None:
        """Erase a run and its token rows."""
        with transaction(self._db):
            if self._db.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount == 0:
                raise NotFound(f"no run {run_id}")

    def add_token_rows(self, run_id: int, rows: Iterable[object]) -> int:
        """Append a batch of TokenMetrics (or dicts) in one commit; returns how many.

        Fields the table has no column for (the cumulative text and reasoning) are dropped.
        NaN is stored as unmeasured (-1). A row with the same (turn, step) as a stored one
        replaces it, so a retried flush does not duplicate rows.
        """
        columns = token_columns(self._db)
        values = []
        for row in rows:
            d = as_dict(row)
            missing = [c for c in columns if c not in d]
            if missing:
                raise ValueError(f"token row lacks {', '.join(missing)}")
            values.append((run_id, *(_storable(d[c]) for c in columns)))
        if not values:
            return 0
        sql = (f"INSERT OR REPLACE INTO run_tokens (run_id, {', '.join(columns)})"
               f" VALUES ({', '.join('?' * (len(columns) + 1))})")
        with transaction(self._db):
            if self._db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise NotFound(f"no run {run_id}")
            self._db.executemany(sql, values)
        return len(values)

    def token_rows(self, run_id: int) -> list[JsonDict]:
        """Every token row of the run by TokenMetrics field name, in (turn, step) order."""
        columns = token_columns(self._db)
        rows = self._db.execute(
            f"SELECT {', '.join(columns)} FROM run_tokens WHERE run_id = ? ORDER BY turn, step",
            (run_id,),
        ).fetchall()
        return [dict(zip(columns, tuple(r), strict=True)) for r in rows]

    def get_run(self, run_id: int) -> Run:
        return self._fetch(run_id)

    def list_runs(
        self,
        *,
        conversation_id: int | None = None,
        message_id: int | None = None,
        headless: bool | None = None,
        model_name: str | None = None,
        model_hash: str | None = None,
        since: float | None = None,
        until: float | None = None,
        scored: bool | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        """Runs, newest first, narrowed by any of the filters (all must hold).

        headless=True keeps runs without a message, False those with one; since/until bound
        created_at (inclusive); scored=True keeps the runs with quality figures.
        """
        where: list[str] = []
        params: list[object] = []
        if conversation_id is not None:
            where.append("r.message_id IN (SELECT id FROM messages WHERE conversation_id = ?)")
            params.append(conversation_id)
        if message_id is not None:
            where.append("r.message_id = ?")
            params.append(message_id)
        if headless is not None:
            where.append("r.message_id IS NULL" if headless else "r.message_id IS NOT NULL")
        if model_name is not None:
            where.append("json_extract(r.model, '$.name') = ?")
            params.append(model_name)
        if model_hash is not None:
            where.append("json_extract(r.model, '$.fast_hash') = ?")
            params.append(model_hash)
        if scored is not None:  # kept its quality figures (a scored run) or not
            where.append("r.quality != '{}'" if scored else "r.quality = '{}'")
        if since is not None:
            where.append("r.created_at >= ?")
            params.append(since)
        if until is not None:
            where.append("r.created_at <= ?")
            params.append(until)
        sql = _SELECT_RUNS
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY r.created_at DESC, r.id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [run_from_row(r) for r in self._db.execute(sql, params).fetchall()]

    def _fetch(self, run_id: int) -> Run:
        row = self._db.execute(_SELECT_RUNS + " WHERE r.id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id}")
        return run_from_row(row)

    def _update(self, run_id: int, assignment: str, params: tuple[object, ...]) -> None:
        with transaction(self._db):
            cur = self._db.execute(f"UPDATE runs SET {assignment} WHERE id = ?", (*params, run_id))
            if cur.rowcount == 0:
                raise NotFound(f"no run {run_id}")
