"""Ctrl-C stops an answer even in a process started with SIGINT ignored (a script's `&` job),
as long as a terminal is attached: `workbench chat` sets the handler itself."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from workbench.cli.chat import ctrl_c_interrupts

REPO = Path(__file__).resolve().parents[2]


def test_an_inherited_ignore_is_replaced_only_where_a_terminal_is_attached():
    before = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        assert not ctrl_c_interrupts(terminal=False)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # a pipeline's choice stands
        assert ctrl_c_interrupts(terminal=True)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_stops_an_answer_in_a_process_that_started_with_sigint_ignored(
        embedded_model_path):
    leader, follower = pty.openpty()  # the terminal: chat's stdin is a tty
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "chat", "-m", str(embedded_model_path), "-n", "800",
         "-p", "Write a very long story about a lighthouse keeper."],
        stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # what `&` does
    os.close(follower)
    out: list[bytes] = []
    started = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(256):
            out.append(chunk)
            started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(180), "no answer started"
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)  # what the terminal sends on Ctrl-C
        proc.wait(timeout=120)
        assert proc.stderr is not None
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    text = err.decode(errors="replace")
    assert "[stopping]" in text, text[-2000:]
    assert proc.returncode == 0, text[-2000:]
