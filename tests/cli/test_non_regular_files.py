"""A FIFO (or any non-regular file) given as a model, projector, image or chat template is refused
before anything opens it: opening a FIFO for reading blocks until a writer comes, so each check
here runs under a deadline and a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from workbench.engine.images import ImageInputError, read_image
from workbench.engine.requests import SessionError
from workbench.engine.session import read_template_file
from workbench.moe.layout import ModelFileError, read_model_facts
from workbench.moe.projector import read_projector_facts

DEADLINE_S = 20
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "model.gguf"
    os.mkfifo(path)
    return path


def _raises_in_time(fn: Callable[[], object], fifo: Path | None = None) -> BaseException:
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    if thread.is_alive():
        if fifo is not None:  # a writer end unblocks the stuck open, so the thread can end
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the call blocked on the FIFO instead of refusing it")
    assert "error" in box, "a FIFO was accepted"
    return box["error"]


@pytest.mark.parametrize(("reader", "error"), [
    (read_model_facts, ModelFileError),
    (read_projector_facts, ModelFileError),
    (read_image, ImageInputError),
    (read_template_file, SessionError),
])
def test_each_reader_refuses_a_fifo_without_opening_it(fifo, reader, error):
    exc = _raises_in_time(lambda: reader(fifo), fifo)
    assert isinstance(exc, error) and "named pipe (FIFO)" in str(exc)


def test_a_character_device_is_refused_as_an_image():
    exc = _raises_in_time(lambda: read_image("/dev/zero"))  # reading it would never end
    assert isinstance(exc, ImageInputError) and "character device" in str(exc)


def _workbench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO)


@pytest.mark.parametrize("command", [["inspect"], ["chat", "-p", "Hi", "-n", "1", "-m"]])
def test_the_cli_refuses_a_fifo_model_with_a_clear_message(fifo, command):
    done = _workbench(*command, str(fifo))
    assert done.returncode == 1, done.stderr
    assert "is a named pipe (FIFO), not a model file" in done.stderr
    assert fifo.exists()  # left alone
