"""A disk that fills up, for tests of what a full file system does to our output files.

A tmpfs cannot be mounted here, so ENOSPC is simulated the one honest way left: the file is a
real file on disk, written through a FileIO subclass that really writes until its byte budget is
spent and then fails as the kernel does, with OSError(ENOSPC). The bytes that made it stay on
disk, so a test that says "nothing was left behind" is checked against a real partial file.
`workbench.atomic_write.RAW_FILE` is the seam every atomic output file is written through.
"""

from __future__ import annotations

import errno
import io
import os

import pytest

from workbench import atomic_write


class FullDisk(io.FileIO):
    """A real file on a disk that fills up after `budget` bytes (per file)."""

    budget = 1000

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.left = self.budget

    def write(self, data) -> int:  # type: ignore[override]
        if self.left <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = super().write(bytes(data)[: self.left])
        self.left -= n
        return n


def fill_the_disk(monkeypatch: pytest.MonkeyPatch, budget: int = FullDisk.budget
                  ) -> type[FullDisk]:
    """From now on (until monkeypatch undoes it) atomic output files land on a disk that is
    full after `budget` bytes of each file."""
    disk = type("FullDisk", (FullDisk,), {"budget": budget})
    monkeypatch.setattr(atomic_write, "RAW_FILE", disk)
    return disk
