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


class NotRegularFileError(OSError):
    """A path names something other than a regular file; raised before anything opens it. An
    OSError, so every reader's existing `except OSError` reports it the way it reports an
    unreadable file; its message (str) is the sentence to show."""

    def __init__(self, path: str | Path, kind: str, what: str) -> None:
        super().__init__(f"{path} is {kind}, not {what}")
        self.kind = kind


def regular_file(path: str | Path, what: str = "a regular file") -> Path:
    """`path` as a Path once `stat` says it is a regular file (or does not exist: the caller's
    open then fails as it always did); NotRegularFileError otherwise. Every path that comes from
    a user, a flag, a setting or the data folder passes through here before it is opened."""
    if kind := not_regular(path):
        raise NotRegularFileError(path, kind, what)
    return Path(path)


def read_bytes(path: str | Path, what: str = "a regular file") -> bytes:
    """The file's bytes, refused as `regular_file` refuses before it is opened."""
    return regular_file(path, what).read_bytes()


def read_text(path: str | Path, what: str = "a regular file", encoding: str = "utf-8") -> str:
    """The file's text, refused as `regular_file` refuses before it is opened."""
    return regular_file(path, what).read_text(encoding=encoding)


class TextFileError(ValueError):
    """Why a file cannot be used as UTF-8 text: `reason` is "kind" (not a regular file; `detail`
    says what it is), "unreadable" (`detail`: the OS's words), "encoding" (`detail`: "byte 7 is
    0xe9") or "empty". Each caller words the sentence and the fix for its own file."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail

    def sentence(self, subject: str) -> str:
        """What is wrong, about `subject` ("the chat template t.jinja"); the caller adds the fix."""
        return {
            "kind": f"{subject} is {self.detail}, not a text file",
            "unreadable": f"cannot read {subject}: {self.detail}",
            "encoding": f"{subject} is not UTF-8 text ({self.detail})",
            "empty": f"{subject} is empty",
        }[self.reason]


def read_utf8_text(path: str | Path) -> str:
    """A user's text file (a chat template, a reference text): refused before it is opened when
    it is not a regular file, then read whole, decoded as UTF-8 and refused when blank."""
    if kind := not_regular(path):  # reading a FIFO would wait for a writer forever
        raise TextFileError("kind", kind)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TextFileError("unreadable", exc.strerror or str(exc)) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TextFileError("encoding", f"byte {exc.start} is 0x{data[exc.start]:02x}") from exc
    if not text.strip():
        raise TextFileError("empty")
    return text
