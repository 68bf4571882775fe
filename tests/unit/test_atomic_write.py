"""Output files are whole or absent, and a failure says what happened (issue 12, case 11).

ENOSPC is simulated by tests/full_disk.py (real bytes on disk, then the kernel's error); the CLI
tests (tests/cli/test_output_files.py) hit a real kernel limit (RLIMIT_FSIZE) instead.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from tests.full_disk import FullDisk, fill_the_disk
from workbench import atomic_write
from workbench.atomic_write import (
    AtomicFile,
    OutputFileError,
    StagedFiles,
    check_output_path,
    write_bytes_atomic,
    write_text_atomic,
)


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> type[FullDisk]:
    return fill_the_disk(monkeypatch)


def test_a_file_is_written_whole_with_the_usual_permissions(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    old = os.umask(0o022)
    try:
        write_text_atomic(target, "hello\n")
    finally:
        os.umask(old)
    assert target.read_text() == "hello\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # not mkstemp's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_an_overwritten_file_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    target.chmod(0o600)
    write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_missing_directory_is_refused_and_never_created(tmp_path: Path) -> None:
    """Issue 12: as root, make-model created missing parents. Now: "create it first"."""
    target = tmp_path / "no" / "such" / "out.csv"
    with pytest.raises(OutputFileError, match=r"does not exist: create it first") as caught:
        write_text_atomic(target, "x")
    assert str(tmp_path / "no" / "such") in str(caught.value)
    assert caught.value.errno == errno.ENOENT
    assert list(tmp_path.iterdir()) == []


def test_a_directory_given_as_the_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputFileError, match=r"is a directory: give the name of a file"):
        check_output_path(tmp_path)
    (tmp_path / "sub").mkdir()
    with pytest.raises(OutputFileError, match=r"is a directory"):
        write_text_atomic(tmp_path / "sub", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["sub"]
    assert list((tmp_path / "sub").iterdir()) == []


def test_a_file_given_as_the_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("")
    with pytest.raises(OutputFileError, match=r"is not a directory"):
        write_text_atomic(tmp_path / "plain" / "out.txt", "x")


def test_a_full_disk_leaves_nothing_behind(tmp_path: Path, full_disk: type[FullDisk]) -> None:
    """Issue 12: a full disk gave a traceback and a 0-byte file. Now a clear message, and the
    partial bytes (really written: see FullDisk) are gone."""
    target = tmp_path / "big.txt"
    with pytest.raises(OutputFileError) as caught:
        write_text_atomic(target, "x" * 100_000)
    message = str(caught.value)
    assert "the disk is full" in message and "nothing was left behind" in message
    assert str(target) in message and "free some space" in message
    assert caught.value.errno == errno.ENOSPC
    assert isinstance(caught.value.__cause__, OSError)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_keeps_the_earlier_file(tmp_path: Path, full_disk: type[FullDisk]) -> None:
    target = tmp_path / "list.json"
    target.write_text("[1, 2]")
    with pytest.raises(OutputFileError, match="the earlier file of that name is unchanged"):
        write_text_atomic(target, "y" * 100_000)
    assert target.read_text() == "[1, 2]"
    assert [p.name for p in tmp_path.iterdir()] == ["list.json"]


def test_the_partial_file_really_held_bytes_before_it_was_removed(
        tmp_path: Path, full_disk: type[FullDisk]) -> None:
    """Control for the two tests above: the simulated disk writes real bytes, so the cleanup
    is what removes them (a test against an always-empty file could not fail)."""
    out = AtomicFile(tmp_path / "f.bin", "wb", buffering=1)
    with pytest.raises(OSError, match="No space"):
        out.file.write(b"z" * 5000)
    assert out.partial_path.stat().st_size == FullDisk.budget
    out.discard()
    assert list(tmp_path.iterdir()) == []


def test_an_exception_in_the_body_discards_the_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("earlier")
    with pytest.raises(RuntimeError), AtomicFile(target) as f:
        f.write("half")
        raise RuntimeError("the producer failed")
    assert target.read_text() == "earlier"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_discarded_file_cannot_be_committed(tmp_path: Path) -> None:
    out = AtomicFile(tmp_path / "out.txt")
    out.discard()
    with pytest.raises(ValueError, match="discarded"):
        out.commit()
    assert list(tmp_path.iterdir()) == []


def test_staged_files_move_in_together_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "model.gguf"
    with StagedFiles(target) as stage:
        assert stage.target.parent != tmp_path and stage.target.parent.parent == tmp_path
        parts = [stage.target.with_name(f"model-{i}.gguf") for i in (1, 2)]
        for i, part in enumerate(parts):
            part.write_bytes(bytes([i]) * 10)
        finals = stage.commit(parts)
    assert finals == [tmp_path / "model-1.gguf", tmp_path / "model-2.gguf"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-1.gguf", "model-2.gguf"]

    with pytest.raises(OutputFileError, match="the disk is full"), StagedFiles(target) as stage:
        stage.target.write_bytes(b"half a model")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-1.gguf", "model-2.gguf"]


def test_messages_name_the_cause(tmp_path: Path) -> None:
    target = tmp_path / "x"
    cases = {
        errno.EFBIG: "largest size allowed",
        errno.EDQUOT: "quota",
        errno.EACCES: "permission denied",
        errno.EROFS: "read-only",
        errno.EIO: os.strerror(errno.EIO),
    }
    for code, words in cases.items():
        message = str(atomic_write.explain(OSError(code, os.strerror(code)), target))
        assert words in message and str(target) in message, (code, message)
