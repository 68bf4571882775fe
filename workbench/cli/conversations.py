"""`python -m workbench conversations list|show|export|import|delete`: the window's
conversations from the terminal, over the same store (cli/store_access.py says how that is
safe while the window is open)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workbench.cli.store_access import (
    CommandError,
    add_db_argument,
    guarded,
    nothing_saved_yet,
    open_store,
    positive_id,
    print_json,
    table,
    when,
)
from workbench.file_kind import read_text

_ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}


def add_conversations_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "conversations", help="list, show, export, import or delete the window's conversations",
        description="The conversations the window keeps, from the terminal. Safe while the "
        "window is open: both use the same store file, whose locking keeps each one's writes "
        "whole; the window shows a change when its list next refreshes.",
    )
    verbs = p.add_subparsers(dest="verb", metavar="ACTION", required=True)

    ls = verbs.add_parser("list", help="conversations, most recently used first",
                          description="One line per conversation: id, last used, messages, "
                          "title. Deleted ones (the window's undo list) only with --deleted.")
    ls.add_argument("--deleted", action="store_true",
                    help="list the deleted conversations instead (restorable with "
                         "`conversations delete --undo ID`)")
    add_db_argument(ls)
    ls.set_defaults(run=guarded(run_list))

    show = verbs.add_parser("show", help="a conversation's messages, as the window shows them",
                            description="The branch on screen in the window (the versions "
                            "chosen there), each message with its stats line.")
    show.add_argument("id", type=positive_id, metavar="ID", help="the conversation (see list)")
    add_db_argument(show)
    show.set_defaults(run=guarded(run_show))

    export = verbs.add_parser(
        "export", help="write a conversation as Markdown or JSON",
        description="Markdown holds the branch on screen (reasoning folded, stats in italics); "
        "JSON holds the whole conversation (every branch, stats, runs, images) and is what "
        "`conversations import` and the window's File > Import read.")
    export.add_argument("id", type=positive_id, metavar="ID", help="the conversation (see list)")
    export.add_argument("-o", "--output", metavar="FILE",
                        help="write here (default: print to stdout)")
    export.add_argument("--format", choices=("md", "json"),
                        help="md or json (default: from FILE's extension, else md)")
    export.add_argument("--db", metavar="FILE", type=Path, help="the store to use (default: "
                        "the window's, workbench.db in the data folder)")
    export.set_defaults(run=guarded(run_export), json=False)

    imp = verbs.add_parser("import", help="add a conversation from a JSON export",
                           description="Adds the conversation in FILE (a JSON export, from "
                           "this command or the window) as a new one; the file is not changed.")
    imp.add_argument("file", metavar="FILE", help="a JSON export")
    add_db_argument(imp)
    imp.set_defaults(run=guarded(run_import))

    rm = verbs.add_parser("delete", help="delete a conversation (undoable)",
                          description="Hides the conversation from the lists and search, as "
                          "the window's delete does; --undo brings it back. The window purges "
                          "deleted conversations later.")
    rm.add_argument("id", type=positive_id, metavar="ID", help="the conversation (see list)")
    rm.add_argument("--undo", action="store_true", help="restore a deleted conversation")
    add_db_argument(rm)
    rm.set_defaults(run=guarded(run_delete))


def run_list(args: argparse.Namespace) -> int:
    convs, counts = [], {}
    if not nothing_saved_yet(args):  # a fresh data folder lists nothing, and creates nothing
        with open_store(args) as store:
            convs = store.list_deleted() if args.deleted else store.list_conversations()
            counts = {c.id: len(store.all_messages(c.id)) for c in convs}
    if args.json:
        print_json([{"id": c.id, "title": c.title, "created_at": c.created_at,
                     "updated_at": c.updated_at, "deleted_at": c.deleted_at,
                     "messages": counts[c.id]} for c in convs])
        return 0
    if not convs:
        print("no deleted conversations" if args.deleted else "no conversations")
        return 0
    stamp = "deleted" if args.deleted else "last used"
    rows = [[str(c.id), when(c.deleted_at if args.deleted else c.updated_at), str(counts[c.id]),
             c.title or "(untitled)"] for c in convs]
    print(table(rows, ["id", stamp, "messages", "title"]))
    return 0


def run_show(args: argparse.Namespace) -> int:
    from workbench.store import format_stats_line

    with open_store(args) as store:
        conv = store.get_conversation(args.id)
        path = store.active_path(args.id)
    if args.json:
        print_json({"id": conv.id, "title": conv.title, "created_at": conv.created_at,
                    "updated_at": conv.updated_at, "deleted_at": conv.deleted_at,
                    "messages": [{"id": m.id, "parent": m.parent_id, "role": m.role,
                                  "content": m.content, "reasoning": m.reasoning,
                                  "status": m.status, "error": m.error,
                                  "created_at": m.created_at, "stats": m.stats.to_json()}
                                 for m in path]})
        return 0
    deleted = " (deleted)" if conv.deleted_at is not None else ""
    print(f"# {conv.title or 'Untitled conversation'}{deleted}  [conversation {conv.id}, "
          f"{len(path)} messages]")
    for m in path:
        status = "" if m.status == "complete" else f" [{m.status}]"
        print(f"\n{_ROLE_NAMES.get(m.role, m.role)}{status}:")
        if m.reasoning:
            print("  (reasoning) " + m.reasoning.replace("\n", "\n  "))
        print("  " + m.content.replace("\n", "\n  ") if m.content else "  (empty)")
        if m.error:
            print(f"  error: {m.error}")
        if m.role == "assistant" and (line := format_stats_line(m.stats)):
            print(f"  — {line}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from workbench.atomic_write import OutputFileError, check_output_path, write_text_atomic

    fmt = args.format
    if fmt is None:
        fmt = "json" if args.output and args.output.lower().endswith(".json") else "md"
    if args.output:
        try:
            check_output_path(args.output)  # before reading the store, not after
        except OutputFileError as exc:
            raise CommandError(str(exc)) from exc
    with open_store(args) as store:
        text = store.export_json(args.id) if fmt == "json" else store.export_markdown(args.id)
    if not args.output:
        sys.stdout.write(text)
        return 0
    try:
        write_text_atomic(args.output, text)
    except OutputFileError as exc:
        raise CommandError(str(exc)) from exc
    print(f"wrote conversation {args.id} as {fmt} to {args.output}", file=sys.stderr)
    return 0


def run_import(args: argparse.Namespace) -> int:
    try:
        text = read_text(args.file, "a conversation export")
    except UnicodeDecodeError:
        raise CommandError(f"{args.file} is not UTF-8 text (a JSON export is)") from None
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{args.file} is not JSON ({exc.msg}, line {exc.lineno}); "
                           "import reads the JSON export, not the Markdown one") from None
    if not isinstance(document, dict):
        raise CommandError(f"{args.file} is not a conversation export (not a JSON object)")
    with open_store(args, create=True) as store:
        try:
            imported = store.import_document(document)
        except ValueError as exc:
            raise CommandError(f"{args.file}: {exc}") from None
    conv = imported.conversation
    if args.json:
        print_json({"id": conv.id, "title": conv.title, "left_out": imported.left_out})
        return 0
    print(f"imported as conversation {conv.id}: {conv.title or '(untitled)'}")
    for line in imported.left_out:
        print(f"  left out: {line}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        conv = store.get_conversation(args.id)
        if args.undo:
            if conv.deleted_at is None:
                raise CommandError(f"conversation {args.id} is not deleted")
            conv = store.undo_delete(args.id)
        else:
            if conv.deleted_at is not None:
                raise CommandError(f"conversation {args.id} is already deleted "
                                   "(--undo restores it)")
            store.delete_conversation(args.id)
    done = "restored" if args.undo else "deleted"
    if args.json:
        print_json({"id": conv.id, "title": conv.title, "action": done})
    else:
        tail = "" if args.undo else f" (undo: conversations delete --undo {args.id})"
        print(f"{done} conversation {args.id}: {conv.title or '(untitled)'}{tail}")
    return 0
