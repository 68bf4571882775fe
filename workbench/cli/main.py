"""`python -m workbench` opens the window; subcommands (chat, inspect, make-model, bench,
screenshot, window, replay) do the rest. `python -m workbench --help` lists them."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from workbench.cli.advise import add_advise_parser
    from workbench.cli.bench import add_bench_parser
    from workbench.cli.chat import add_chat_parser
    from workbench.cli.compare import add_compare_parser
    from workbench.cli.conversations import add_conversations_parser
    from workbench.cli.explain import add_explain_parser
    from workbench.cli.models import add_inspect_parser, add_make_model_parser
    from workbench.cli.replay import add_replay_parser
    from workbench.cli.runs import add_runs_parser
    from workbench.cli.score import add_score_parser
    from workbench.cli.serve import add_serve_parser
    from workbench.cli.window import add_bench_ui_parser, add_screenshot_parser, add_window_parser

    parser = argparse.ArgumentParser(
        prog="python -m workbench",
        description="Chat with local Mixture-of-Experts models and see what every token costs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_chat_parser(sub)
    add_inspect_parser(sub)
    add_make_model_parser(sub)
    add_bench_parser(sub)
    add_compare_parser(sub)
    add_replay_parser(sub)
    add_explain_parser(sub)
    add_conversations_parser(sub)
    add_runs_parser(sub)
    add_advise_parser(sub)
    add_score_parser(sub)
    add_bench_ui_parser(sub.choices["bench"])
    add_window_parser(sub)
    add_screenshot_parser(sub)
    add_serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        # The default is the window, on the embedded model, ready to chat.
        args_list = ["window"]
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # llama.cpp's own warnings (load quirks, cache notes) are for -v, not for every chat.
    logging.getLogger("workbench.llama").setLevel(logging.ERROR)
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.run(args))
