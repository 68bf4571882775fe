"""The terminal chat at its prompt, driven through a real terminal (a pty), as a user types.

Issue #29: Ctrl-C at an idle prompt clears the line and asks again (Ctrl-D leaves), and
`/help` lists the commands instead of going to the model. Ctrl-C comes from the terminal's line
discipline (the ^C byte becomes SIGINT for the foreground process group), not from os.kill,
and a process started with SIGINT ignored (a script's `&`) must behave the same.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from workbench.cli.chat import COMMANDS, command_of, help_text

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 120  # the load of a 98 MB model on a busy machine, with room


class Terminal:
    """`python -m workbench chat ...` on the slave side of a pty; we are the keyboard."""

    def __init__(self, argv: list[str], ignore_sigint: bool = False) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: its controlling terminal is the pty
            if ignore_sigint:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # survives exec, as with `&`
            os.chdir(REPO)
            os.execv(sys.executable, [sys.executable, "-m", "workbench", *argv])
        self.pid, self.fd = pid, fd
        self.seen = ""
        self.status: int | None = None

    def read_until(self, text: str, after: int = 0, timeout: float = WAIT_S) -> str:
        """Everything printed, once `text` appears past offset `after`."""
        deadline = time.monotonic() + timeout
        while text not in self.seen[after:]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} did not appear; the terminal shows:\n{self.seen}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO: the child closed the terminal (it exited)
                chunk = b""
            if not chunk:
                raise AssertionError(f"the chat ended before {text!r}; it showed:\n{self.seen}")
            self.seen += chunk.decode("utf-8", "replace")
        return self.seen

    def type(self, keys: str) -> int:
        """Type `keys`; returns the offset of the output so far, to read what follows."""
        mark = len(self.seen)
        os.write(self.fd, keys.encode())
        return mark

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with_output = select.select([self.fd], [], [], 0.2)[0]
            if with_output:
                with contextlib.suppress(OSError):  # EIO once the child closed the terminal
                    self.seen += os.read(self.fd, 4096).decode("utf-8", "replace")
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
                return os.waitstatus_to_exitcode(status)
        raise AssertionError(f"the chat did not leave; it showed:\n{self.seen}")

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except ProcessLookupError:
                pass
        os.close(self.fd)


@pytest.fixture
def terminal(chat_model_path, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(tmp_path / "data"))
    opened: list[Terminal] = []

    def start(ignore_sigint: bool = False) -> Terminal:
        term = Terminal(["chat", "-m", str(chat_model_path), "-n", "8", "-t", "2"],
                        ignore_sigint=ignore_sigint)
        opened.append(term)
        term.read_until("ready (")
        term.read_until("> ")
        return term

    yield start
    for term in opened:
        term.close()


@pytest.mark.slow
@pytest.mark.parametrize("ignore_sigint", [False, True],
                         ids=["plain", "started-with-sigint-ignored"])
def test_ctrl_c_clears_the_line_help_lists_commands_and_ctrl_d_leaves(terminal, ignore_sigint):
    term = terminal(ignore_sigint)
    # Half a question, then Ctrl-C: the line is dropped and the prompt asks again.
    mark = term.type("What is the capital of")
    term.read_until("capital of", mark)
    mark = term.type("\x03")
    term.read_until("> ", mark)
    # Had the half line survived, this would be "What is the capital of/help": a message.
    mark = term.type("/help\r")
    last_line = help_text().splitlines()[-1]
    shown = term.read_until(last_line, mark)[mark:]
    for name in COMMANDS:
        assert name in shown
    assert "generation:" not in term.seen  # nothing went to the model
    term.read_until("> ", mark + shown.index(last_line))
    mark = term.type("\x04")  # Ctrl-D on the empty line leaves, cleanly
    assert term.wait() == 0, term.seen
    assert "Traceback" not in term.seen


def test_only_a_bare_slash_word_is_a_command():
    assert command_of("/help") == "/help" and command_of("  /HELP ") == "/help"
    assert command_of("/exit") == "/quit" and command_of("/new") == "/new"
    assert command_of("/helpme") == ""  # an unknown command is said so, not sent
    assert command_of("/usr/bin is where?") is None  # a message that starts with a slash
    assert command_of("hello /help") is None
    assert all(name in help_text() for name in COMMANDS)


@pytest.mark.slow
def test_keys_typed_during_an_answer_wait_for_the_next_prompt(chat_model_path, tmp_path,
                                                              monkeypatch):
    """Issue 39: typing while the answer streamed echoed the keys into the middle of it. Now
    the answer reads as the model wrote it, and the keys (Backspace applied) start the next
    prompt's line, where Enter sends them."""
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(tmp_path / "data"))
    term = Terminal(["chat", "-m", str(chat_model_path), "-n", "96", "-t", "2",
                     "--temp", "0", "--repeat-penalty", "1.0"])
    try:
        term.read_until("ready (")
        term.read_until("> ")
        mark = term.type("Write a long poem about the sea.\r")
        term.read_until("the sea.\r\n", mark)
        answer_at = len(term.seen)
        # The first words of the answer, then keys while it streams.
        while len(term.seen) < answer_at + 8:
            ready = select.select([term.fd], [], [], 0.5)[0]
            if ready:
                term.seen += os.read(term.fd, 4096).decode("utf-8", "replace")
        term.type("/helx\x7fp")
        shown = term.read_until("generation:", answer_at)
        answer = shown[answer_at:shown.index("generation:", answer_at)]
        assert "/hel" not in answer, answer  # not echoed into the answer
        assert "generation:" not in shown[:answer_at]
        term.read_until("> /help", answer_at)  # the held keys start the next line
        mark = term.type("\r")
        term.read_until(help_text().splitlines()[-1], mark)  # Enter sent "/help": the list
        mark = term.type("\x04")
        assert term.wait() == 0, term.seen
    finally:
        term.close()
