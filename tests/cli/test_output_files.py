"""Output files from the CLI: clear errors, no traceback, nothing left behind (issue 12, case 11).

A full file system cannot be mounted here. The one real kernel limit on writing a file that a
test can set is RLIMIT_FSIZE: with SIGXFSZ ignored, a write past it fails with EFBIG, in the
real command, through the real writers (the gguf package, the metrics sink). That is what these
tests use; ENOSPC itself, and its message, is simulated in-process (tests/full_disk.py), because
nothing can make the kernel return it here.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path


def _cli(*args: str, fsize: int | None = None, timeout: int = 300
         ) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death by signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, timeout=timeout, env=env,
                          preexec_fn=limit if fsize is not None else None)


def _clear_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert errors, proc.stderr
    assert all(any(w in ln for ln in errors) for w in words), proc.stderr


def test_make_model_refuses_a_missing_directory_and_does_not_create_it(tmp_path: Path):
    """Issue 12, case 11: as root, make-model created missing parent directories."""
    proc = _cli("make-model", "-o", str(tmp_path / "no" / "such" / "m.gguf"))
    _clear_error(proc, "does not exist: create it first")
    assert list(tmp_path.iterdir()) == []


def test_make_model_refuses_a_directory_as_the_file(tmp_path: Path):
    proc = _cli("make-model", "-o", str(tmp_path))
    _clear_error(proc, "is a directory")
    assert list(tmp_path.iterdir()) == []


def test_make_model_past_the_file_size_limit_leaves_nothing(tmp_path: Path):
    """Issue 12, case 11: make-model that could not write its file gave a traceback and left
    a 0-byte file. The tiny model is > 1 MiB; the limit is 256 KiB."""
    earlier = tmp_path / "m.gguf"
    earlier.write_bytes(b"an earlier model")
    proc = _cli("make-model", "-o", str(earlier), fsize=256 << 10)
    _clear_error(proc, "largest size allowed", "the earlier file of that name is unchanged")
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]
    assert earlier.read_bytes() == b"an earlier model"


def test_chat_csv_to_a_missing_directory_or_a_directory_is_refused_before_loading(
        tmp_path: Path):
    """Issue 12, case 11: `chat --csv` there gave a traceback (and a 0-byte file)."""
    missing = _cli("chat", "-p", "hi", "--csv", str(tmp_path / "no" / "run.csv"))
    _clear_error(missing, "does not exist: create it first")
    directory = _cli("chat", "-p", "hi", "--csv", str(tmp_path))
    _clear_error(directory, "is a directory")
    assert list(tmp_path.iterdir()) == []


def test_chat_whose_metrics_cannot_be_written_still_answers(embedded_model_path, tmp_path):
    """A metrics file that hits the limit mid-session: the answer is printed all the same, the
    error says the file was not written, the exit code says it failed, nothing is left."""
    csv_path = tmp_path / "run.csv"
    proc = _cli("chat", "-m", str(embedded_model_path), "-p", "Say hello.", "-n", "8", "-t", "2",
                "--csv", str(csv_path), fsize=1024)
    _clear_error(proc, "metrics file", "largest size allowed", "nothing was left behind")
    assert proc.stdout.strip()  # the answer
    assert "generation:" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_screenshot_to_a_missing_directory_is_refused_before_the_window_opens(tmp_path: Path):
    proc = _cli("screenshot", "-o", str(tmp_path / "no" / "shot.png"))
    _clear_error(proc, "does not exist: create it first")
    assert list(tmp_path.iterdir()) == []
