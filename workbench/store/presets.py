"""Presets: named sets of settings (the settings panel's save/load).

The store keeps a preset's settings as saved (old setting names too: applying a preset maps
them) and when it was last saved or renamed, which it hands out as the Preset's `updated_at`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from typing import Any

from workbench.presets import Preset
from workbench.store.records import NotFound
from workbench.store.schema import transaction


class PresetOps:
    _db: sqlite3.Connection

    def save_preset(self, name: str, settings: Mapping[str, Any]) -> Preset:
        """Create the preset, or overwrite the one with that name."""
        if not name.strip():
            raise ValueError("a preset needs a name")
        now = time.time()
        with transaction(self._db):
            self._db.execute(
                "INSERT INTO presets (name, settings, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT(name) DO UPDATE SET settings = excluded.settings,"
                " updated_at = excluded.updated_at",
                (name, json.dumps(dict(settings)), now),
            )
        return Preset(name=name, settings=dict(settings), updated_at=now)

    def load_preset(self, name: str) -> Preset:
        row = self._db.execute(
            "SELECT name, settings, updated_at FROM presets WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no preset {name!r}")
        return _preset(row)

    def rename_preset(self, old: str, new: str) -> None:
        """Rename; refuses (ValueError) to overwrite another preset."""
        if not new.strip():
            raise ValueError("a preset needs a name")
        with transaction(self._db):
            if old != new and self._db.execute(
                "SELECT 1 FROM presets WHERE name = ?", (new,)
            ).fetchone():
                raise ValueError(f"a preset named {new!r} exists")
            cur = self._db.execute(
                "UPDATE presets SET name = ?, updated_at = ? WHERE name = ?",
                (new, time.time(), old),
            )
            if cur.rowcount == 0:
                raise NotFound(f"no preset {old!r}")

    def delete_preset(self, name: str) -> None:
        with transaction(self._db):
            if self._db.execute("DELETE FROM presets WHERE name = ?", (name,)).rowcount == 0:
                raise NotFound(f"no preset {name!r}")

    def list_presets(self) -> list[Preset]:
        """Every preset, by name (case-insensitive)."""
        rows = self._db.execute(
            "SELECT name, settings, updated_at FROM presets ORDER BY name COLLATE NOCASE, name"
        ).fetchall()
        return [_preset(r) for r in rows]


def _preset(row: sqlite3.Row | tuple[Any, ...]) -> Preset:
    """A (name, settings, updated_at) row."""
    return Preset(name=row[0], settings=json.loads(row[1]), updated_at=row[2])
