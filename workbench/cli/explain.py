"""`python -m workbench explain RUN.csv`: the slow tokens of each answer and what caused them."""

from __future__ import annotations

import argparse
import math
import sys

from workbench import strict_json
from workbench.bench.stalls import SLOW_FACTOR

DEFAULT_LIMIT = 10


def add_explain_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain", help="the slow tokens of each answer in a metrics file, and why",
        description="Find the tokens of each answer (turn) whose decode took far longer than "
        "the answer's median, and name what the recorded figures show about each: experts "
        "read from disk (cache misses), time waiting on those reads, major page faults, memory "
        "pressure (RSS or MemAvailable falling), the first token after a prefill, a "
        "speculative verify batch, CPU contention (wall far above CPU time). Reads our metrics "
        "files (chat --csv, the window's run export) and upstream bmoe_metrics v1/v2 files.",
        epilog="Unmeasured figures are never taken as evidence: a file without CPU times "
        "cannot show contention. docs/telemetry.md explains each figure.",
    )
    p.add_argument("files", nargs="+", metavar="RUN.csv", help="metrics files to explain")
    p.add_argument("--factor", type=float, default=SLOW_FACTOR, metavar="X",
                   help=f"a token is slow at X times its answer's median wall or more "
                        f"(default {SLOW_FACTOR:g}; above 1)")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                   help=f"list at most the N slowest tokens of each answer (default "
                        f"{DEFAULT_LIMIT}; 0 lists all)")
    p.add_argument("--model", metavar="MODEL.gguf",
                   help="the model the run used, to count experts read (default: the model "
                        "file the metrics file names, when it is still there)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")
    p.set_defaults(run=run_explain)


def run_explain(args: argparse.Namespace) -> int:
    from workbench.bench.stall_report import explain_file, format_report, report_json
    from workbench.engine.metrics_reader import MetricsFormatError, read_metrics_csv

    if not (math.isfinite(args.factor) and args.factor > 1):
        print(f"error: --factor must be a number above 1, not {args.factor:g}", file=sys.stderr)
        return 2
    if args.limit < 0:
        print("error: --limit must be 0 (all) or more", file=sys.stderr)
        return 2
    expert_bytes = None
    if args.model:
        expert_bytes = _expert_bytes(args.model)
        if expert_bytes is None:
            return 1
    documents, texts = [], []
    for path in args.files:
        try:
            mf = read_metrics_csv(path)
        except (OSError, MetricsFormatError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if not mf.rows:
            print(f"error: {path} has no token rows to explain", file=sys.stderr)
            return 1
        turns = explain_file(mf, factor=args.factor, expert_bytes=expert_bytes)
        if args.json:
            documents.append(report_json(turns, str(path), args.factor))
        else:
            texts.append(format_report(turns, str(path), args.factor, args.limit or None))
    if args.json:
        doc = documents[0] if len(documents) == 1 else {"files": documents}
        print(strict_json.dumps(doc))
    else:
        print("\n".join(texts), end="")
    return 0


def _expert_bytes(model: str) -> float | None:
    from workbench.bench.stall_report import expert_bytes_of
    from workbench.moe.layout import ModelFileError

    try:
        size = expert_bytes_of(model)
    except (ModelFileError, OSError) as exc:
        print(f"error: --model: {exc}", file=sys.stderr)
        return None
    if size <= 0:
        print(f"error: --model: {model} has no expert tensors (not a MoE model)",
              file=sys.stderr)
        return None
    return size
