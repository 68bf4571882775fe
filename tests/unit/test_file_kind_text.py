"""`file_kind.read_utf8_text`: the one reader of a user's text file (a chat template, a
reference text) says why a file cannot serve, as a reason each caller words its own way."""

from __future__ import annotations

import os

import pytest

from workbench.file_kind import TextFileError, read_utf8_text


@pytest.mark.parametrize(("make", "reason", "detail"), [
    (lambda p: os.mkfifo(p), "kind", "a named pipe (FIFO)"),
    (lambda p: p.mkdir(), "kind", "a folder"),
    (lambda p: None, "unreadable", "No such file or directory"),
    (lambda p: p.write_bytes(b"caf\xe9"), "encoding", "byte 3 is 0xe9"),
    (lambda p: p.write_text(" \n\t"), "empty", ""),
])
def test_each_reason_a_file_cannot_serve_as_text(tmp_path, make, reason, detail):
    path = tmp_path / "t.txt"
    make(path)
    with pytest.raises(TextFileError) as caught:
        read_utf8_text(path)
    assert (caught.value.reason, caught.value.detail) == (reason, detail)


def test_a_text_file_reads_whole(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("héllo\n", encoding="utf-8")
    assert read_utf8_text(path) == "héllo\n"
