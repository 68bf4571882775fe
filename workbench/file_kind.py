"""What kind of file a path names, told from `stat` alone, before anything opens it.

Opening a FIFO for reading blocks until a writer comes, forever if none does; reading a character
device such as /dev/zero never ends. A path the user gives as a model, projector, image or chat
template must therefore be a regular file, and that is checked without opening it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def not_regular(path: str | Path) -> str:
    """"" for a regular file (a symlink to one included) or a path that does not exist (callers
    word "missing" their own way); otherwise what it is instead, e.g. "a named pipe (FIFO)"."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISREG(mode):
        return ""
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")
