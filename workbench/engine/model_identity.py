"""A model file's identity: cheap enough for every load, strong enough to tell runs apart."""

from __future__ import annotations

import hashlib
from pathlib import Path

from workbench.engine.metrics import ModelIdentity

_BLOCK = 1 << 20


def fast_hash(path: Path) -> str:
    """SHA-256 over the size and three 1 MiB blocks (head, middle, tail), not the whole file.

    Enough to distinguish two quantizations or a re-download of a multi-GiB model without reading
    it all; not a security hash.
    """
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        for offset in sorted({0, max(0, size // 2 - _BLOCK // 2), max(0, size - _BLOCK)}):
            f.seek(offset)
            h.update(f.read(_BLOCK))
    return h.hexdigest()[:16]


def model_identity(path: Path) -> ModelIdentity:
    return ModelIdentity(
        path=str(path), name=path.name, size_bytes=path.stat().st_size, fast_hash=fast_hash(path)
    )
