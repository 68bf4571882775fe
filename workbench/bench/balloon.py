"""A memory balloon: hold available RAM below a target without cgroups or root.

A child process allocates anonymous memory, touches every page (so it is really resident; with no
swap it cannot be evicted), reports, and holds it until released. Both the engine and the page
cache then see a machine of roughly the target size.
"""

from __future__ import annotations

import subprocess
import sys
from types import TracebackType

import psutil

MIB = 1 << 20

_CHILD = r"""
import mmap, sys
n = int(sys.argv[1])
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
chunk = b"\1" * (1 << 20)
for off in range(0, n - len(chunk) + 1, len(chunk)):
    m[off:off + len(chunk)] = chunk
print("ready", flush=True)
sys.stdin.read()
"""


class Balloon:
    """`with Balloon(leave_available_bytes):` holds MemAvailable near that figure."""

    def __init__(self, leave_available_bytes: int) -> None:
        self.leave = leave_available_bytes
        self.size = 0
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> Balloon:
        available = psutil.virtual_memory().available
        self.size = max(0, available - self.leave)
        if self.size < 64 * MIB:
            return self
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(self.size)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            self.__exit__(None, None, None)
            raise RuntimeError("the memory balloon could not inflate")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
