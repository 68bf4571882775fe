"""`python -m workbench bench ...`: benchmarks that print ratios measured side by side."""

from __future__ import annotations

import argparse
import sys

from workbench.config import Config
from workbench.config_cli import add_arguments, config_from_args


def add_bench_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="run a benchmark")
    kinds = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    overhead = kinds.add_parser(
        "overhead", help="engine with full telemetry vs a bare low-level decode loop"
    )
    add_arguments(overhead)
    overhead.add_argument("--repeats", type=int, default=5)
    overhead.add_argument("--warmup", type=int, default=1)
    overhead.set_defaults(run=run_overhead_cmd)


def run_overhead_cmd(args: argparse.Namespace) -> int:
    from workbench.bench.overhead import run_overhead

    config = config_from_args(args, Config(n_predict=256))
    report = run_overhead(
        config, repeats=args.repeats, warmup=args.warmup,
        log=lambda line: print(line, file=sys.stderr),
    )
    print(report.last_line())
    return 0
