"""The window's keyboard shortcuts, declared once (Qt-free): the menus take their keys from
here, and Help > Keyboard shortcuts lists exactly these (docs/chat.md describes them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Shortcut:
    key: str  # a QKeySequence string ("" for keys a widget handles itself)
    shown: str  # as the Help lists it
    does: str


SEND = Shortcut("", "Enter", "send the message (Shift+Enter: a new line)")
STOP = Shortcut("Esc", "Esc", "stop the answer (in an inline edit: cancel it)")
NEW_CHAT = Shortcut("Ctrl+N", "Ctrl+N", "new conversation (the message box takes the keys)")
FOCUS_COMPOSER = Shortcut("Ctrl+L", "Ctrl+L", "to the message box")
EDIT_LAST = Shortcut("Ctrl+E", "Ctrl+E", "edit your last message (Enter sends it again)")
REGENERATE = Shortcut("Ctrl+R", "Ctrl+R", "regenerate the last answer")
CONTINUE = Shortcut("Ctrl+Shift+R", "Ctrl+Shift+R",
                    "continue the last answer (cut by Stop or the token limit)")
NEXT_CHAT = Shortcut("Ctrl+PgDown", "Ctrl+PgDown", "next conversation in the list")
PREVIOUS_CHAT = Shortcut("Ctrl+PgUp", "Ctrl+PgUp", "previous conversation in the list")
COPY_CHAT = Shortcut("Ctrl+Shift+C", "Ctrl+Shift+C", "copy the whole chat")
OPEN_MODEL = Shortcut("Ctrl+O", "Ctrl+O", "open a model")
SETTINGS = Shortcut("Ctrl+,", "Ctrl+,", "the Settings dock")
HELP = Shortcut("F1", "F1", "this list")
QUIT = Shortcut("Ctrl+Q", "Ctrl+Q", "quit")

ALL: tuple[Shortcut, ...] = (SEND, STOP, NEW_CHAT, FOCUS_COMPOSER, EDIT_LAST, REGENERATE, CONTINUE,
                             NEXT_CHAT, PREVIOUS_CHAT, COPY_CHAT, OPEN_MODEL, SETTINGS, HELP,
                             QUIT)


def help_text() -> str:
    """The Help's list: one line per shortcut."""
    width = max(len(s.shown) for s in ALL)
    return "\n".join(f"{s.shown.ljust(width)}  {s.does}" for s in ALL)
