"""Recently opened model files, newest first, in a small JSON file in the data dir (Qt-free)."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.atomic_write import write_text_atomic
from workbench.file_kind import read_text
from workbench.paths import data_dir

MAX_RECENT = 10


def recent_file(data: Path | None = None) -> Path:
    """The list's file in `data` (the window's data directory; the user's by default)."""
    return (data or data_dir()) / "recent_models.json"


def load_recent(path: Path | None = None) -> list[str]:
    file = path or recent_file()
    try:
        items = json.loads(read_text(file))
    except (OSError, ValueError):
        return []
    return [p for p in items if isinstance(p, str)][:MAX_RECENT]


def add_recent(model: str, path: Path | None = None) -> list[str]:
    """Put `model` first. Written whole or not at all (atomic_write): a failed write (a full
    disk) raises OutputFileError, leaves the earlier list as it was and no temporary behind."""
    file = path or recent_file()
    items = [model, *[p for p in load_recent(file) if p != model]][:MAX_RECENT]
    file.parent.mkdir(parents=True, exist_ok=True)  # the data directory is ours to create
    write_text_atomic(file, json.dumps(items, indent=1))
    return items
