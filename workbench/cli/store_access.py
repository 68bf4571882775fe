"""Opening the window's store from a command (`conversations`, `runs`): the same file, its
locking, and one clear line for every way it can fail.

A command opens the store like a second window would: SQLite's WAL lets it read beside the
window's writer, its writes wait for the window's (busy timeout, store/schema.py), and it runs
no start-up recovery (an answer the window is streaming is the window's). A command that only
reads never creates the file.
"""

from __future__ import annotations

import argparse
import functools
import math
import sqlite3
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench import strict_json
from workbench.file_kind import regular_file
from workbench.store import NotFound, Store, StoreBusy, StoreFault, default_path
from workbench.store.faults import classify


class CommandError(Exception):
    """Bad input or an unusable store: the message is for the user as it stands."""


def add_db_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="FILE", type=Path,
                   help="the store to use (default: the window's, workbench.db in the data "
                        "folder; WORKBENCH_DATA_DIR moves it)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")


def open_store(args: argparse.Namespace, *, create: bool = False) -> Store:
    path: Path = args.db if args.db is not None else default_path()
    if not create and not path.exists():
        raise CommandError(f"no store at {path} (nothing has been saved there yet; --db names "
                           "another)")
    try:
        regular_file(path, "a store file")  # a FIFO would block the first read forever
    except OSError as exc:
        raise CommandError(str(exc)) from None
    return Store.open(path, recover=False)


def nothing_saved_yet(args: argparse.Namespace) -> bool:
    """No --db and no store in the data folder yet: a fresh start, whose lists are empty (a
    --db that names no file is a mistake, and open_store says so)."""
    return args.db is None and not default_path().exists()


def guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command's body with its failures turned into one line on stderr and exit 1."""

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except StoreBusy as exc:
            print(_busy(exc), file=sys.stderr)
        except (CommandError, StoreFault) as exc:
            print(f"error: {exc}", file=sys.stderr)
        except NotFound as exc:
            print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        except sqlite3.Error as exc:
            fault = classify(exc, args.db if args.db is not None else default_path())
            print(_busy(fault) if isinstance(fault, StoreBusy)
                  else f"error: the store failed: {fault or exc}", file=sys.stderr)
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
        return 1

    return wrapper


def _busy(fault: StoreBusy) -> str:
    return (f"error: the store is busy: {fault} (another program, the window perhaps, held it "
            "locked for longer than the 5 s wait); nothing was changed, try again")


def positive_id(text: str) -> int:
    """An argparse type: a conversation's or run's id."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an id (a whole number, as "
                                         "`list` shows)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an id (ids start at 1)")
    return value


def when(ts: float | None) -> str:
    if ts is None or not math.isfinite(ts):
        return "—"
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def print_json(doc: Any) -> None:
    print(strict_json.dumps(doc))


def table(rows: list[list[str]], header: list[str]) -> str:
    """Columns padded to their widest cell; the last column is left free (a title)."""
    all_rows = [header, *rows]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(header) - 1)]
    lines = []
    for r in all_rows:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
