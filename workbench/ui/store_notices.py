"""What the window says about its conversation database when the file or its place fails
(Qt-free): one text per kind of fault, each saying what happened, what is kept and what the
user can do. The window shows them in its store banner with the offered actions.
"""

from __future__ import annotations

from pathlib import Path

from workbench import __version__
from workbench.store import SchemaTooNew, StoreFault
from workbench.store.salvage import Copied, SalvageReport

SALVAGE = "Salvage into a new database"
START_FRESH = "Move it aside and start fresh"
TRY_AGAIN = "Try again"
_TEMPORARY = ("This window uses a temporary store until then: nothing you write in it is kept "
              "when the window closes (File > Export keeps a conversation).")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def at_open(fault: StoreFault, copied_conversations: int = 0) -> tuple[str, list[str]]:
    """The banner for a window that opened on a temporary store: (text, action labels)."""
    path = fault.path
    if fault.kind == "damaged":
        return (f"The conversation database {path} is damaged ({fault.detail}). It is kept as "
                f"it is, never written to. Salvage copies what can still be read into a new "
                f"database; either way the damaged file stays beside it. {_TEMPORARY}",
                [SALVAGE, START_FRESH])
    if isinstance(fault, SchemaTooNew):
        by = f", by workbench {fault.writer}" if fault.writer else ""
        need = (f"Open it with workbench {fault.writer} or newer"
                if fault.writer else "Open it with the newer workbench that wrote it")
        return (f"The conversation database {path} was written by a newer workbench (schema "
                f"version {fault.found}{by}); this workbench ({__version__}) reads schema "
                f"versions up to {fault.known}. {need}, or update this one. The file is "
                f"unchanged. {_TEMPORARY}", [])
    if fault.kind == "busy":
        return (f"The conversation database {path} is locked by another program "
                f"({fault.detail}). Nothing in it was changed. Close that program or wait for "
                f"it, then Try again: what you write meanwhile is added to it then. "
                f"{_TEMPORARY}", [TRY_AGAIN])
    copy = (f" It starts as a copy of your {_plural(copied_conversations, 'conversation')}, "
            "to read and export." if copied_conversations else "")
    if fault.kind == "full":
        return (f"The disk holding {path.parent} is full ({fault.detail}), so the conversation "
                f"database cannot be written. Nothing in it was changed. Free some space, then "
                f"Try again: what you write meanwhile is added to it then.{copy} "
                f"{_TEMPORARY}", [TRY_AGAIN])
    return (f"The conversation database cannot be written at {path} ({fault.detail}). Nothing "
            f"in it was changed. Make the folder writable (or start the workbench with "
            f"WORKBENCH_DATA_DIR set to another folder), then Try again: what you write "
            f"meanwhile is added to it then.{copy} {_TEMPORARY}", [TRY_AGAIN])


def in_use(fault: StoreFault) -> tuple[str, list[str]]:
    """The banner for a fault met while the window was using the real file."""
    if fault.kind == "full":
        return (f"The disk holding {fault.path.parent} is full: the last change was not saved "
                f"({fault.detail}). Free some space; the next change is saved again. An answer "
                f"that could not be saved says so: Chat > Copy chat keeps its text.", [])
    if fault.kind == "damaged":
        return (f"The conversation database {fault.path} has become damaged ({fault.detail}); "
                f"changes may not be saved. Move it aside (it is kept) and go on in a new "
                f"database, salvaging what can be read.", [SALVAGE, START_FRESH])
    return (f"The conversation database {fault.path} can no longer be written "
            f"({fault.detail}): the last change was not saved. Make it writable again; the "
            f"next change is saved again.", [])


def copied_text(copied: Copied) -> str:
    parts = [_plural(copied.conversations, "conversation"), _plural(copied.messages, "message")]
    if copied.runs:
        parts.append(_plural(copied.runs, "run"))
    return ", ".join(parts)


def rebuilt(aside: Path, salvaged: SalvageReport | None, merged: Copied | None) -> str:
    text = f"The damaged database was moved to {aside} (kept). "
    if salvaged is None:
        text += "A new, empty database is in use."
    else:
        text += (f"Salvaged {copied_text(salvaged.copied)} into a new database "
                 f"({salvaged.method}).")
        lost = salvaged.copied.unreadable + salvaged.copied.skipped
        if lost:
            text += (f" {_plural(lost, 'part')} of the old file could not be read; it stays "
                     f"in {aside.name}.")
        elif not salvaged.copied.conversations and salvaged.problems:
            text += f" {salvaged.problems[-1]}."
    if merged is not None and (merged.conversations or merged.messages):
        text += f" What you wrote meanwhile ({copied_text(merged)}) was added to it."
    return text


def retried(path: Path, merged: Copied) -> str:
    text = f"The conversation database {path} is in use again."
    if merged.conversations or merged.messages:
        text += f" What you wrote meanwhile ({copied_text(merged)}) was added to it."
    return text
