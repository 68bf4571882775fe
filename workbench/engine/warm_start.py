"""Warm start across runs: a model's routing frequencies, kept in the data folder, and the
preload order they give at the next open.

One file per model identity (size and a hash of three blocks, `model_identity.fast_hash`):
`<dir>/<file name>-<hash>.npy`, a (n_layer, n_expert) float64 array of routed slots (token x
top-k, prefill included) summed over past sessions, each older session's counts halved so the
model's recent use leads. Written atomically at close; a damaged or mis-shaped file is ignored
(with a warning) and replaced at the next close, so a bad file never stops a session.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np

from workbench.atomic_write import AtomicFile
from workbench.engine.model_identity import fast_hash
from workbench.file_kind import read_bytes, regular_file
from workbench.paths import data_dir

log = logging.getLogger(__name__)

OLDER_WEIGHT = 0.5  # each earlier session's counts weigh half at the next save


def warm_start_dir() -> Path:
    """Where the window and `chat` keep the routing frequencies: the data folder's."""
    return data_dir() / "expert-routing"


def frequency_path(directory: Path, model: Path) -> Path:
    return directory / f"{model.name}-{fast_hash(model)}.npy"


def load_frequencies(path: Path, shape: tuple[int, int]) -> tuple[np.ndarray | None, str]:
    """The saved counts, or (None, why not). A missing file is no warning ("")."""
    try:
        data = read_bytes(path, "a routing-frequency file")
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"warm start: cannot read {path.name} ({exc}); starting cold"
    try:
        counts = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        return None, (f"warm start: {path.name} is damaged ({exc}); starting cold, it is "
                      "rewritten at close")
    if counts.shape != shape or counts.dtype.kind != "f" or not np.isfinite(counts).all() or (
            counts < 0).any():
        return None, (f"warm start: {path.name} does not fit this model (shape {counts.shape}, "
                      f"expected {shape}); starting cold, it is rewritten at close")
    return counts.astype(np.float64), ""


def save_frequencies(path: Path, session_counts: np.ndarray, previous: np.ndarray | None) -> None:
    """This session's routed counts plus the previous file's, halved; atomic."""
    total = session_counts.astype(np.float64)
    if previous is not None and previous.shape == total.shape:
        total = total + OLDER_WEIGHT * previous
    regular_file(path, "a routing-frequency file")  # a FIFO or folder there is not replaced
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.save(buf, total, allow_pickle=False)
    with AtomicFile(path, "wb") as out:
        out.write(buf.getvalue())


def preload_order(counts: np.ndarray, layer_experts: np.ndarray) -> list[tuple[int, int]]:
    """Every (layer, expert) with a count, most routed first (ties: lower layer, lower id), on
    the layers the streamer manages only."""
    cells = [(float(counts[il, e]), il, e)
             for il in range(min(len(layer_experts), counts.shape[0]))
             for e in range(min(int(layer_experts[il]), counts.shape[1]))
             if counts[il, e] > 0]
    cells.sort(key=lambda c: (-c[0], c[1], c[2]))
    return [(il, e) for _, il, e in cells]
