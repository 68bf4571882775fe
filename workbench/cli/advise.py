"""`python -m workbench advise MODEL`: the settings to use for a model on this machine, and the
hit rate to expect (bench/advise.py plans, bench/advise_probe.py probes)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

from workbench import strict_json

DEFAULT_PROBE_TOKENS = 32


def add_advise_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "advise", help="the settings to use for a model on this machine",
        description="Reads the model's layout (its header: dense part, experts, top-k) and this "
        "machine's memory and cores, and prints what to set: whether to stream the experts, "
        "the expert cache, dropping and threads, as settings and as flags for chat and the "
        "window. For a model that streams, a short routing probe (a greedy decode with the "
        "experts streamed and no cache) is replayed at the planned cache size to give the hit "
        "rate to expect.",
        epilog="The probe loads the model streamed: it needs the dense part in memory, not the "
        "whole model. --memory-mib asks what the advice would be with that much available.",
    )
    p.add_argument("model", metavar="MODEL", help="a GGUF model file (the first shard of a split "
                   "one)")
    p.add_argument("-c", "--ctx", type=int, default=None, metavar="N",
                   help="the context you will use, for its KV cache (default: the setting's "
                        "default)")
    p.add_argument("--tokens", type=int, default=DEFAULT_PROBE_TOKENS, metavar="N",
                   help=f"tokens the routing probe generates (default {DEFAULT_PROBE_TOKENS})")
    p.add_argument("--no-probe", dest="probe", action="store_false",
                   help="plan from memory alone: no expected hit rate, dropping left off")
    p.add_argument("--memory-mib", type=float, default=None, metavar="M",
                   help="plan for M MiB available instead of what this machine has now")
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")
    p.set_defaults(run=run_advise)


def run_advise(args: argparse.Namespace) -> int:
    from workbench.bench.advise import format_advice, layout_of, plan, this_machine, with_probe
    from workbench.config import BY_NAME, Config
    from workbench.moe.layout import ModelFileError, read_model_facts
    from workbench.moe.memory_estimate import estimate_memory

    n_ctx = args.ctx if args.ctx is not None else Config().n_ctx
    if n_ctx < BY_NAME["n_ctx"].min:
        print(f"error: --ctx must be at least {BY_NAME['n_ctx'].min:g}", file=sys.stderr)
        return 2
    if not 1 <= args.tokens <= 4096:
        print("error: --tokens must be 1 to 4096", file=sys.stderr)
        return 2
    if args.memory_mib is not None and not (math.isfinite(args.memory_mib)
                                            and args.memory_mib > 0):
        print("error: --memory-mib must be a positive number of MiB", file=sys.stderr)
        return 2
    path = Path(args.model)
    try:
        facts = read_model_facts(path)
    except (ModelFileError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    layout = layout_of(facts)
    machine = this_machine()
    if args.memory_mib is not None:
        machine = dataclasses.replace(machine, available_mib=args.memory_mib)
    kv_mib = estimate_memory(facts, n_ctx).kv_max_mib
    advice = plan(layout, machine, kv_mib)
    if args.probe and advice.stream:
        from workbench.bench.advise_probe import probe_routing
        from workbench.engine.session import SessionError

        print(f"probing routing: {args.tokens} tokens, experts streamed…", file=sys.stderr)
        try:
            probe = probe_routing(path, budget_mib=advice.cache_mb, tokens=args.tokens,
                                  threads=advice.threads)
        except (SessionError, RuntimeError) as exc:
            print(f"error: the routing probe failed: {exc}", file=sys.stderr)
            return 1
        advice = with_probe(advice, probe)
    if args.json:
        doc = {"model": str(path), "layout": dataclasses.asdict(layout),
               "machine": dataclasses.asdict(machine), "kv_mib": kv_mib, "n_ctx": n_ctx,
               "verdict": advice.verdict, "settings": advice.settings, "flags": advice.flags,
               "reasons": list(advice.reasons), "notes": list(advice.notes),
               "probe": dataclasses.asdict(advice.probe) if advice.probe else None}
        print(strict_json.dumps(doc, default=str))
        return 0
    print(format_advice(path.name, layout, machine, advice), end="")
    return 0
