"""The lean streamed load: a streamed model's load reads its metadata and dense weights, not the
whole file.

llama.cpp maps the model with MAP_POPULATE and advises WILLNEED over the whole file, and offers no
switch for either. While `lean_load()` is active on a thread, the native library points libllama's
own imports of mmap and posix_madvise at wrappers (native/src/lean_load.cpp) that, for mappings
of the model's files made on that thread, drop MAP_POPULATE, put zero pages over the expert
ranges and narrow WILLNEED to the rest. The capture warm-up then computes on zero experts (its
output is discarded) and the streamer rebinds every expert tensor onto memory it fills itself
before the first real decode. If libllama's imports cannot be found or written, the load goes
ahead the normal way and the report says why.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from workbench.backend import native
from workbench.moe.layout import ExpertTensor

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
    willneed_skipped_bytes: int = 0  # expert bytes left out of the prefetch

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
        return (f"lean load: {self.blanked_bytes / MIB:.0f} MiB of experts not read at load, "
                f"{self.willneed_bytes / MIB:.0f} MiB of metadata and dense weights prefetched")


@contextmanager
def lean_load(shards: Sequence[Path], experts: Sequence[ExpertTensor]) -> Iterator[LeanLoadReport]:
    """Arm the lean load on this thread for the block (one llama.cpp model load of `shards`, whose
    expert tensors are `experts`). A failure to arm never raises: the report says so and the load
    inside runs the normal way. Only for a streamed session, which rebinds every expert tensor."""
    report = LeanLoadReport()
    lib = native.load()
    paths = (ctypes.c_char_p * len(shards))(*[os.fsencode(p) for p in shards])
    ranges = (native.WbLeanRange * len(experts))(
        *[native.WbLeanRange(t.shard, t.offset, t.n_bytes) for t in experts])
    if lib.wb_lean_load_begin(paths, len(shards), ranges, len(experts)) != 0:
        report.reason = native.last_error(lib) or "no reason given"
        yield report
        return
    report.armed = True
    try:
        yield report
    finally:
        stats = native.WbLeanLoadStats()
        native.check(lib.wb_lean_load_end(ctypes.byref(stats)), lib, "ending the lean load")
        for name, _ in native.WbLeanLoadStats._fields_:
            if hasattr(report, name):
                setattr(report, name, int(getattr(stats, name)))


def patched_entries() -> int:
    """libllama GOT entries pointing at the lean-load wrappers now (0 unless a load is armed)."""
    return int(native.load().wb_lean_load_patched())
