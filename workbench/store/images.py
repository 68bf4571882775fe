"""Images attached to messages: kept in the database as blobs, once per content (SHA-256).

A message refers to its images in order (message_images); the bytes sit once in `images`, so
the same picture sent twice, or carried by an edited copy of a message, is stored once. The
image is kept exactly as attached (its encoded bytes), so exporting and importing it, or
reopening the conversation, gives the model the very same input.
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.store.schema import transaction


@dataclass(frozen=True, slots=True)
class StoredImage:
    sha256: str
    data: bytes
    name: str = ""  # the file name it was attached from


def new_image(data: bytes, name: str = "") -> StoredImage:
    return StoredImage(hashlib.sha256(data).hexdigest(), data, name)


def insert_images(conn: sqlite3.Connection, message_id: int, images: Sequence[StoredImage]
                  ) -> None:
    """Attach `images` to the message, in order (inside the caller's transaction)."""
    for position, image in enumerate(images):
        conn.execute("INSERT OR IGNORE INTO images (sha256, data, name, created_at)"
                     " VALUES (?, ?, ?, ?)", (image.sha256, image.data, image.name, time.time()))
        conn.execute("INSERT INTO message_images (message_id, position, sha256, name)"
                     " VALUES (?, ?, ?, ?)", (message_id, position, image.sha256, image.name))


def images_of(conn: sqlite3.Connection, message_ids: Iterable[int]
              ) -> dict[int, list[StoredImage]]:
    """Each message's images in order; messages without images are left out."""
    ids = sorted(set(message_ids))
    out: dict[int, list[StoredImage]] = {}
    for start in range(0, len(ids), 500):  # under SQLite's bound-parameter limit
        part = ids[start:start + 500]
        rows = conn.execute(
            "SELECT mi.message_id, mi.sha256, mi.name, i.data FROM message_images mi"
            " JOIN images i ON i.sha256 = mi.sha256"
            f" WHERE mi.message_id IN ({', '.join('?' * len(part))})"
            " ORDER BY mi.message_id, mi.position", part).fetchall()
        for r in rows:
            out.setdefault(int(r["message_id"]), []).append(
                StoredImage(r["sha256"], bytes(r["data"]), r["name"]))
    return out


def images_to_json(images: Sequence[StoredImage]) -> list[dict[str, str]]:
    return [{"sha256": i.sha256, "name": i.name, "data": base64.b64encode(i.data).decode()}
            for i in images]


def images_from_json(items: Any) -> list[StoredImage]:
    """The images of an exported message; ValueError when one is malformed or its bytes do
    not match its hash (a damaged document must not put another picture in the chat)."""
    if not items:
        return []
    if not isinstance(items, list):
        raise ValueError(f"malformed images {items!r:.80}")
    out = []
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("data"), str):
            raise ValueError(f"malformed image {item!r:.80}")
        try:
            data = base64.b64decode(item["data"], validate=True)
        except ValueError as exc:
            raise ValueError(f"an image's data is not base64: {exc}") from exc
        image = new_image(data, str(item.get("name", "")))
        if item.get("sha256") not in (None, image.sha256):
            raise ValueError(f"image {item.get('sha256')!r:.20} does not match its data "
                             "(the document is damaged)")
        out.append(image)
    return out


class ImageOps:
    _db: sqlite3.Connection

    def add_images(self, message_id: int, images: Sequence[StoredImage]) -> None:
        """Attach images to a message (once, right after adding it)."""
        with transaction(self._db):
            insert_images(self._db, message_id, images)

    def message_images(self, message_ids: Iterable[int]) -> dict[int, list[StoredImage]]:
        return images_of(self._db, message_ids)
