"""`python -m workbench compare A.csv B.csv ...`: the compare table of metrics files, as text."""

from __future__ import annotations

import argparse
import sys


def add_compare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="summary figures of metrics files side by side, with 95 %% intervals",
        description="Compare runs from their metrics files (ours or upstream bmoe_metrics). "
        "Files with the same configuration are repeats of one arm; ratios are to the first arm.",
    )
    p.add_argument("files", nargs="+", metavar="CSV", help="metrics files; the first is the base")
    p.add_argument("--trim", type=int, default=0, metavar="N",
                   help="leave out the first N tokens of every turn as warm-up (default: 0)")
    p.add_argument("--no-group", dest="group", action="store_false",
                   help="one arm per file, even when files share a configuration")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (0)")
    p.set_defaults(run=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    from workbench.bench.compare import compare, format_table, load_runs
    from workbench.engine.metrics_reader import MetricsFormatError

    if args.trim < 0 or args.resamples < 1:
        print("error: --trim must be 0 or more and --resamples 1 or more", file=sys.stderr)
        return 2
    try:
        runs = load_runs(args.files, trim=args.trim)
    except (OSError, MetricsFormatError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    table = compare(runs, group=args.group, resamples=args.resamples, seed=args.seed)
    print(format_table(table), end="")
    return 0
