"""`python -m workbench` opens the window; subcommands (chat, inspect, make-model, bench,
screenshot, window, replay) do the rest. `python -m workbench --help` lists them."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn


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
    choose_wait_policy(args_list)
    parser = build_parser()
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.run(args))


class _NoExit(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def choose_wait_policy(argv: Sequence[str]) -> None:
    """OpenMP's wait policy (engine/wait_policy.py), from the threads and lanes on the command
    line. It runs before the parser is built: building it imports modules that load llama.cpp,
    and libgomp reads the policy once, as it loads. A command line this cannot read gets the
    defaults' policy; the real parser reports what is wrong with it."""
    from workbench.config import Config
    from workbench.config_cli import add_arguments
    from workbench.engine import wait_policy

    settings = _NoExit(add_help=False, allow_abbrev=False)
    add_arguments(settings)
    try:
        known, _ = settings.parse_known_args(list(argv)[1:])
    except (ValueError, argparse.ArgumentError):
        known = argparse.Namespace()
    default = Config()
    wait_policy.apply(wait_policy.choose(
        cores=wait_policy.usable_cores(),
        threads=getattr(known, "n_threads", default.n_threads),
        lanes=getattr(known, "io_threads", default.io_threads),
        streaming=getattr(known, "moe_stream", default.moe_stream),
    ))
