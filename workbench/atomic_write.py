"""Output files that are whole or absent: written under a temporary name beside the target,
fsynced, then renamed over it; any failure removes the temporary and says what happened.

Every file the package writes for a user (metrics CSVs, generated models, exports, screenshots,
bench results, the recent-models list) goes through here, so they share one set of rules:

* The target's directory must exist: it is never created here (as root, a mistyped path would
  otherwise grow directories anywhere). The message says "create it first". Callers that own a
  directory (the data and cache directories, a bench's output directory) create it themselves.
* A target that is a directory, a disk that is full, a size limit or a permission problem is an
  `OutputFileError` (an OSError) whose message names the file, says what happened, and says that
  nothing was left behind and an earlier file of that name is unchanged.
* The temporary is in the same directory (a rename across file systems is not atomic) and is a
  hidden name ending in ``.partial``; only a crash (the process killed) can leave one, with what
  was written so far.

It sits at the bottom of the layers, beside paths.py, so that engine/, moe/, store/, bench/ and
ui/ can all reach it; it imports nothing of the package.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

# The raw file class the temporaries are written through. A test may substitute a subclass
# whose write fails (a full disk cannot be mounted in a test); nothing else changes it.
RAW_FILE: type[io.FileIO] = io.FileIO

_PARTIAL = ".partial"


class OutputFileError(OSError):
    """An output file was not written. The message is for the user; `errno` is the cause's."""

    def __init__(self, message: str, cause_errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = cause_errno  # type: ignore[misc]


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """The target as a Path, or an OutputFileError if it cannot be written: before any work."""
    target = Path(path)
    if target.name in ("", ".", "..") or target.is_dir():
        raise OutputFileError(f"{target} is a directory: give the name of a file to write "
                              f"(for example {target / 'NAME'})", errno.EISDIR)
    parent = target.parent
    if not parent.exists():
        raise OutputFileError(f"the directory {parent} does not exist: create it first, or write "
                              f"somewhere else ({target.name} was not written)", errno.ENOENT)
    if not parent.is_dir():
        raise OutputFileError(f"{parent} is not a directory, so {target} cannot be written",
                              errno.ENOTDIR)
    return target


def explain(exc: OSError, target: Path) -> OutputFileError:
    """`exc`, raised while writing `target`, in the user's terms (once the temporary is gone)."""
    if isinstance(exc, OutputFileError):
        return exc
    code = exc.errno
    if code == errno.ENOSPC:
        what = "the disk is full"
        todo = "free some space and try again"
    elif code == errno.EDQUOT:
        what = "the disk quota is used up"
        todo = "free some space and try again"
    elif code == errno.EFBIG:
        what = "the file grew past the largest size allowed here (file system or `ulimit -f`)"
        todo = "write it somewhere else or raise the limit"
    elif code in (errno.EACCES, errno.EPERM):
        what = f"permission denied in {target.parent}"
        todo = "write it somewhere you may write"
    elif code == errno.EROFS:
        what = f"{target.parent} is on a read-only file system"
        todo = "write it somewhere else"
    elif code == errno.EISDIR:
        return check_error(target) or OutputFileError(f"{target} is a directory", code)
    elif code in (errno.ENOENT, errno.ENOTDIR):
        return check_error(target) or OutputFileError(
            f"{target} was not written: no file can be created in {target.parent} "
            f"({exc.strerror or exc})", code)
    else:
        what = exc.strerror or str(exc)
        todo = "check the disk and try again"
    kept = "nothing was left behind" + (
        " and the earlier file of that name is unchanged" if target.exists() else "")
    return OutputFileError(f"{target} was not written: {what}; {kept}. To fix it, {todo}.", code)


def check_error(target: Path) -> OutputFileError | None:
    """What check_output_path says about `target` now, or None if it sees nothing wrong."""
    try:
        check_output_path(target)
    except OutputFileError as exc:
        return exc
    return None


def _partial_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(4)}{_PARTIAL}")


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable. Best effort: some file systems cannot fsync a directory, and the
    file itself is already whole on disk."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


class AtomicFile:
    """An open temporary beside `path`; `commit()` puts it in place, `discard()` removes it.

    As a context manager it commits on success and discards on an exception, which is then
    raised as an OutputFileError if it was an OSError. `file` is a text file for mode "w" (with
    `encoding`, `errors`, `newline`, like open()) and a binary one for "wb".
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "w", *,
                 encoding: str | None = "utf-8", errors: str | None = None,
                 newline: str | None = None, buffering: int = io.DEFAULT_BUFFER_SIZE) -> None:
        if mode not in ("w", "wb"):
            raise ValueError(f"mode must be 'w' or 'wb', not {mode!r}")
        self.path = check_output_path(path)
        self.committed = False
        self.closed = False
        self.partial_path, fd = self._create()
        try:
            self._raw = RAW_FILE(fd, "wb", closefd=True)
        except BaseException:
            os.close(fd)
            self.partial_path.unlink(missing_ok=True)
            raise
        try:
            buffered = io.BufferedWriter(self._raw, buffer_size=max(1, buffering))
            self.file: IO[Any] = (buffered if mode == "wb" else io.TextIOWrapper(
                buffered, encoding=encoding, errors=errors, newline=newline))
        except BaseException:
            self._raw.close()
            self.partial_path.unlink(missing_ok=True)
            raise

    def _create(self) -> tuple[Path, int]:
        # O_EXCL with a random name instead of mkstemp: mkstemp makes the file 0600, and the
        # target would keep that mode; this way the umask decides, as for any new file.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        while True:
            partial = _partial_name(self.path)
            try:
                fd = os.open(partial, flags, 0o666)
            except FileExistsError:
                continue
            except OSError as exc:
                raise explain(exc, self.path) from exc
            break
        try:
            earlier = os.stat(self.path)
            if stat.S_ISREG(earlier.st_mode):  # an overwritten file keeps its permissions
                os.fchmod(fd, stat.S_IMODE(earlier.st_mode))
        except OSError:
            pass
        return partial, fd

    def commit(self) -> Path:
        """Flush, fsync, close and rename over the target; on failure nothing is left."""
        if self.committed:
            return self.path
        if self.closed:
            raise ValueError(f"{self.path}: the file was discarded, it cannot be committed")
        try:
            self.file.flush()
            os.fsync(self._raw.fileno())
            self.file.close()
            os.replace(self.partial_path, self.path)
        except OSError as exc:
            self.discard()
            raise explain(exc, self.path) from exc
        self.committed = self.closed = True
        _fsync_dir(self.path.parent)
        return self.path

    def discard(self) -> None:
        """Close and remove the temporary; the target (or its absence) is as it was."""
        if self.closed:
            return
        self.closed = True
        for f in (self.file, self._raw):
            # A failed flush on close: the bytes are being thrown away anyway.
            with contextlib.suppress(OSError, ValueError):
                f.close()
        self.partial_path.unlink(missing_ok=True)

    def __enter__(self) -> IO[Any]:
        return self.file

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            self.commit()
            return
        self.discard()
        if isinstance(exc, OSError) and not isinstance(exc, OutputFileError):
            raise explain(exc, self.path) from exc


def write_text_atomic(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    with AtomicFile(path, "w", encoding=encoding) as f:
        f.write(text)
    return Path(path)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    with AtomicFile(path, "wb") as f:
        f.write(data)
    return Path(path)


class StagedFiles:
    """For a writer that opens and names its own files (a split GGUF's shards): it writes into a
    fresh hidden directory beside `path` (`target` is `path` inside it), and `commit(files)`
    fsyncs those files and renames each into place. On an exception, or without a commit, the
    directory and everything in it is removed.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = check_output_path(path)
        self.directory = self._create()
        self.target = self.directory / self.path.name

    def _create(self) -> Path:
        while True:
            directory = _partial_name(self.path)
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:
                continue
            except OSError as exc:
                raise explain(exc, self.path) from exc
            return directory

    def commit(self, files: Sequence[Path]) -> list[Path]:
        """Move `files` (written inside `directory`) beside `path`, in order; their new paths."""
        finals = [self.path.with_name(f.name) for f in files]
        moved: list[Path] = []
        try:
            for f in files:
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            for f, final in zip(files, finals, strict=True):
                os.replace(f, final)
                moved.append(final)
        except OSError as exc:
            # A rename that fails after others worked (rare: same directory) would leave half
            # a split model: the shards already moved go too.
            for final in moved:
                final.unlink(missing_ok=True)
            self.discard()
            raise explain(exc, self.path) from exc
        self.discard()
        _fsync_dir(self.path.parent)
        return finals

    def discard(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.discard()
        if isinstance(exc, OSError) and not isinstance(exc, OutputFileError):
            raise explain(exc, self.path) from exc
