"""Keys typed while the terminal chat answers: held, not echoed into the answer, and given
back on the next prompt line (issue 39: typing during an answer garbled the transcript, the
terminal echoing the keys in the middle of the streamed text).

While an answer streams, the terminal neither echoes nor waits for a whole line (Ctrl-C still
stops the answer: signals stay on); afterwards what was typed is read, edited as the line
discipline would have (Backspace erases, Ctrl-U clears, Enter ends nothing: the line is the
user's to finish), and the terminal is put back as it was. Not a terminal: nothing to hold.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|O.|.)")  # arrows, function keys: dropped


@dataclass
class HeldKeys:
    text: str = ""  # what was typed, as a line to carry on


def typed_line(raw: str) -> str:
    """The line `raw` keystrokes leave: printable text, Backspace and Ctrl-U applied, line
    ends and other control keys dropped."""
    line: list[str] = []
    for ch in _ESCAPE.sub("", raw):
        if ch in "\x7f\b":
            if line:
                line.pop()
        elif ch == "\x15":  # Ctrl-U
            line.clear()
        elif ch.isprintable():
            line.append(ch)
    return "".join(line)


@contextlib.contextmanager
def keys_held(stream: TextIO | None = None) -> Iterator[HeldKeys]:
    stream = stream or sys.stdin
    held = HeldKeys()
    try:
        import termios

        fd = stream.fileno()
        saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    except (ImportError, OSError, ValueError, AttributeError):
        saved = None
    if saved is None:
        yield held
        return
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~(termios.ECHO | termios.ICANON)  # lflag; ISIG stays: Ctrl-C still stops
    quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 0, 0  # a read returns what is there
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield held
    finally:
        chunks = []
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, 4096):
                chunks.append(chunk)
        termios.tcsetattr(fd, termios.TCSANOW, saved)
        held.text = typed_line(b"".join(chunks).decode("utf-8", "replace"))
