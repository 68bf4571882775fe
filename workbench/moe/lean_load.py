"""The lean streamed load: a streamed model's load reads its metadata and dense weights, not the
whole file.

llama.cpp maps the model with MAP_POPULATE and advises WILLNEED over the whole file, and offers no
switch for either. While `lean_load()` is active on a thread, the native library points libllama's
own imports of mmap and posix_madvise at wrappers (native/src/lean_load.cpp) that, for mappings
of the model's files made on that thread, drop MAP_POPULATE, put zero pages over the ranges the
caller names (the experts, and the dense weights when they go to private memory) and narrow
WILLNEED to the rest. The capture warm-up then computes on zeros there (its output is discarded);
before the first real decode the streamer rebinds every expert tensor and dense weight it reads
itself, and `restore()` maps the file back under any blanked tensor the graph did not capture.
If libllama's imports cannot be found or written, the load goes ahead the normal way and the
report says why.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from workbench.backend import native
from workbench.moe.layout import ExpertTensor, TensorInfo

MIB = 1 << 20


@dataclass(slots=True)
class LeanLoadReport:
    """What the lean load did (filled when the `with` block ends)."""

    armed: bool = False
    reason: str = ""  # why it was not armed ("" when it was)
    populate_stripped: int = 0  # model mappings whose MAP_POPULATE was dropped
    file_map_bytes: int = 0
    blanked_bytes: int = 0  # expert bytes mapped to zero pages for the load
    blank_failures: int = 0  # expert ranges left file-backed (correct, but read on touch)
    willneed_bytes: int = 0  # bytes still prefetched (metadata and dense weights)
    willneed_skipped_bytes: int = 0  # blanked bytes left out of the prefetch
    bases: tuple[int, ...] = ()  # each shard's mapping address (0: not mapped while armed)
    restored_bytes: int = 0  # blanked bytes mapped back for tensors the graph did not capture

    @property
    def effective(self) -> bool:
        """The load really skipped reading the experts (something was stripped or blanked)."""
        return self.armed and (self.populate_stripped > 0 or self.blanked_bytes > 0)

    @property
    def note(self) -> str:
        """One line for the load notice."""
        if not self.armed:
            return (f"lean load unavailable ({self.reason}): the load read the whole model file; "
                    "--no-lean-load silences this")
        if not self.effective:
            return "lean load armed, but llama.cpp mapped no model file: the load ran as usual"
        return (f"lean load: {self.blanked_bytes / MIB:.0f} MiB of the file not read by "
                f"llama.cpp at load, {self.willneed_bytes / MIB:.0f} MiB prefetched")


@contextmanager
def lean_load(shards: Sequence[Path],
              blank: Sequence[TensorInfo | ExpertTensor]) -> Iterator[LeanLoadReport]:
    """Arm the lean load on this thread for the block (one llama.cpp model load of `shards`), with
    zero pages over the `blank` tensors. A failure to arm never raises: the report says so and
    the load inside runs the normal way. Only for a streamed session: each blanked tensor must be
    rebound or `restore()`d before a real decode."""
    report = LeanLoadReport()
    lib = native.load()
    paths = (ctypes.c_char_p * len(shards))(*[os.fsencode(p) for p in shards])
    ranges = (native.WbLeanRange * len(blank))(
        *[native.WbLeanRange(t.shard, t.offset, t.n_bytes) for t in blank])
    if lib.wb_lean_load_begin(paths, len(shards), ranges, len(blank)) != 0:
        report.reason = native.last_error(lib) or "no reason given"
        yield report
        return
    report.armed = True
    try:
        yield report
    finally:
        stats = native.WbLeanLoadStats()
        bases = (ctypes.c_uint64 * len(shards))()
        native.check(lib.wb_lean_load_end(ctypes.byref(stats), bases, len(shards)), lib,
                     "ending the lean load")
        for name, _ in native.WbLeanLoadStats._fields_:
            if hasattr(report, name):
                setattr(report, name, int(getattr(stats, name)))
        report.bases = tuple(int(b) for b in bases)


def restore(report: LeanLoadReport, shards: Sequence[Path], tensors: Sequence[TensorInfo]) -> int:
    """Maps the file back under blanked `tensors` that nothing rebound (the graph did not capture
    them, so the warm-up never showed them to the streamer); returns the bytes restored."""
    lib = native.load()
    total = 0
    for t in tensors:
        got = lib.wb_lean_load_restore(os.fsencode(shards[t.shard]), report.bases[t.shard],
                                       t.offset, t.n_bytes)
        if got < 0:
            raise native.NativeLibraryError(
                f"restoring {t.name} after the lean load: {native.last_error(lib)}")
        total += got
    report.restored_bytes += total
    return total


def patched_entries() -> int:
    """libllama GOT entries pointing at the lean-load wrappers now (0 unless a load is armed)."""
    return int(native.load().wb_lean_load_patched())
