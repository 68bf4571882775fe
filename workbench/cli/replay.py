"""`python -m workbench replay TRACE`: what other cache sizes, Belady's optimum, dropping and a
smaller top-k would have done on a recorded route trace (`chat --route-trace FILE`)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator

from workbench.moe.replay import MIB, ReplayReport, WhatIf


def add_replay_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a route trace: cache sizes, Belady, dropping")
    p.add_argument("trace", metavar="TRACE", help="a route trace (chat --route-trace FILE)")
    p.add_argument("--cache-mb", metavar="A,B,C", nargs="+", action="extend", default=[],
                   help="expert cache budgets to simulate, MiB (comma- or space-separated); "
                        "default: the recorded budget and 1/8 ... 8/8 of every expert")
    p.add_argument("--substitute", metavar="L,M", nargs="+", action="extend", default=[],
                   help="also predict cache-aware substitution at these margins (0..1, as "
                        "--expert-substitute), from the score rows a trace recorded with "
                        "`chat --route-trace FILE --route-scores` carries")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw hit rate against cache size into this PNG")
    p.set_defaults(run=run_replay)


def _numbers(values: list[str], flag: str, example: str) -> Iterator[tuple[str, float]]:
    """Each comma- or space-separated item of a list flag, with its value as a number."""
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            try:
                yield part, float(part)
            except ValueError:
                raise ValueError(f"{flag}: {part!r} is not {example}") from None


def parse_budgets(values: list[str]) -> list[int]:
    out: list[int] = []
    for part, mib in _numbers(values, "--cache-mb",
                              "a number of MiB (for example --cache-mb 64,128,512)"):
        if not mib > 0 or math.isinf(mib):
            raise ValueError(f"--cache-mb: {part!r} must be a positive number of MiB")
        out.append(int(mib * MIB))
    return sorted(set(out))


def parse_margins(values: list[str]) -> list[float]:
    out: list[float] = []
    for part, margin in _numbers(values, "--substitute", "a margin (a number from 0 to 1, for "
                                 "example --substitute 0.15,0.3)"):
        if not 0 < margin <= 1:  # NaN fails this too
            raise ValueError(f"--substitute: {part!r} must be above 0 and at most 1")
        out.append(margin)
    return sorted(set(out))


def run_replay(args: argparse.Namespace) -> int:
    from workbench.atomic_write import OutputFileError, check_output_path
    from workbench.moe.cache_policies import add_policy_rows
    from workbench.moe.replay import default_budgets, lookups, recorded_hit_pct, replay
    from workbench.moe.route_trace import read_trace

    try:
        budgets = parse_budgets(args.cache_mb)
        margins = parse_margins(getattr(args, "substitute", []))
        if args.plot:
            check_output_path(args.plot)  # before the replay, not after it
        trace = read_trace(args.trace)
    except (ValueError, OutputFileError) as exc:  # RouteTraceError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 1
    meta = trace.meta
    if not trace.loads:
        print(f"error: {args.trace} holds no routing (was anything generated while it was "
              "recorded?)", file=sys.stderr)
        return 1
    loads = [(t.turn, t.load) for t in trace.loads]
    total = sum(b * meta.n_expert for b in meta.expert_bytes.values())
    if not budgets:
        budgets = default_budgets(total, meta.cache_budget_bytes)
    report = replay(loads, meta.expert_bytes, meta.n_expert, meta.n_expert_used, budgets,
                    preloaded=meta.preloaded)
    add_policy_rows(report, lookups(loads), meta.expert_bytes, meta.preloaded)
    if meta.preloaded:
        print(f"the engine started warm ({len(meta.preloaded)} experts preloaded): every "
              "replay below starts from the same entries")
    print(format_report(report, trace.meta.model, meta.cache_budget_bytes,
                        turns=len({t.turn for t in trace.loads}),
                        budget_recorded=meta.budget_recorded))
    if margins:
        try:
            print("\n" + format_substitution(loads, meta, budgets, margins))
        except ValueError as exc:  # MissingScoresError: recorded without --route-scores
            print(f"error: {exc}", file=sys.stderr)
            return 1
    recorded = recorded_hit_pct(loads)
    if recorded >= 0:
        at = (f"at {meta.cache_budget_bytes / MIB:.1f} MiB" if meta.budget_recorded else
              "at a budget the trace does not record (an upstream trace: pass that budget "
              "to --cache-mb to compare)")
        print(f"\nthe engine recorded {recorded:.1f} % hits in this trace (its residency "
              f"column) {at}")
    if args.plot:
        from workbench.moe.cache_sizing import curves_from_report
        from workbench.ui.qt_replay_plot import write_curves_png

        curves_from = curves_from_report(report, meta.cache_budget_bytes)
        try:
            write_curves_png(curves_from, args.plot, f"{meta.model}: hit rate vs cache size")
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {args.plot}")
    return 0


def format_substitution(loads: list, meta, budgets: list[int], margins: list[float]) -> str:
    """What each margin would substitute, hit and read at each budget (generated tokens), from
    the trace's score rows; the margin 0 row is the router's own choice (the top-k of its scores,
    which a trace recorded with substitution on did not run)."""
    from workbench.moe.substitute_replay import replay_substitute

    lines = ["cache-aware substitution, predicted from the recorded score rows (LRU; a "
             "substituted run's later tokens would route differently, so past the first "
             "substitution this is a prediction):",
             f"{'budget MiB':>11} {'margin':>7} {'gen hit%':>9} {'MiB/tok':>9} "
             f"{'substituted':>12} {'of slots':>9}"]
    for budget in budgets:
        for margin in (0.0, *margins):
            got = replay_substitute(loads, meta.expert_bytes, budget, margin,
                                    preloaded=meta.preloaded)
            share = (100.0 * got.substituted / got.reranked) if got.reranked else -1.0
            lines.append(f"{budget / MIB:>11.1f} {margin:>7.2f} "
                         f"{_pct(got.result.decode_hit_pct):>9} "
                         f"{_mib(got.result.decode_mib_per_token):>9} {got.substituted:>12} "
                         f"{_pct(share) + ' %':>9}")
    return "\n".join(lines)


def _pct(value: float) -> str:
    return "n/a" if value < 0 or math.isnan(value) else f"{value:.1f}"


def _mib(value: float) -> str:
    return "n/a" if value < 0 else f"{value:.2f}"


def _what_if(w: WhatIf) -> str:
    return (f"    {w.name:<10} reads avoided {_pct(w.reads_avoided_pct):>6} %   weight mass "
            f"dropped {_pct(w.mass_dropped_pct):>6} %   "
            f"slots dropped {_pct(w.slots_dropped_pct)} %")


def format_report(report: ReplayReport, model: str, recorded_budget: int, turns: int,
                  budget_recorded: bool = True) -> str:
    if not budget_recorded:
        budget = "not recorded (upstream trace)"
    else:
        budget = f"{recorded_budget / MIB:.1f} MiB" if recorded_budget >= 0 else "none (no cache)"
    lines = [
        f"{model}: {turns} turn(s), {report.decode_tokens} generated tokens, top-k "
        f"{report.n_expert_used}; every expert {report.total_expert_bytes / MIB:.1f} MiB; "
        f"recorded budget {budget}",
        f"cliff: one generated token routes {_mib(report.token_demand_bytes / MIB)} MiB of "
        "experts; an LRU smaller than that hits almost never",
        "",
        "hit % counts every lookup (prefill too, as the engine's own counter does); "
        "gen = while generating",
        f"{'budget MiB':>11} {'LRU hit%':>9} {'Belady%':>8} {'LRU gen%':>9} {'Bel gen%':>9} "
        f"{'LRU MiB/tok':>12} {'Bel MiB/tok':>12}",
    ]
    for row in report.budgets:
        lru, bel = row.lru, row.belady
        lines.append(
            f"{lru.budget_bytes / MIB:>11.1f} {_pct(lru.hit_pct):>9} {_pct(bel.hit_pct):>8} "
            f"{_pct(lru.decode_hit_pct):>9} {_pct(bel.decode_hit_pct):>9} "
            f"{_mib(lru.decode_mib_per_token):>12} {_mib(bel.decode_mib_per_token):>12}")
    names = list(report.budgets[0].policies) if report.budgets else []
    if names:
        lines += ["", "eviction policies at the same budgets (cold start, no guard, no "
                  "prefetch), hit % of every lookup / while generating:",
                  f"{'budget MiB':>11} {'LRU':>13} " + " ".join(f"{n:>13}" for n in names)
                  + f" {'Belady':>13}"]
        for row in report.budgets:
            cells = [row.lru] + [row.policies[n] for n in names] + [row.belady]
            lines.append(f"{row.lru.budget_bytes / MIB:>11.1f} " + " ".join(
                f"{_pct(c.hit_pct) + '/' + _pct(c.decode_hit_pct):>13}" for c in cells))
    lines += ["", "lossy what-ifs, generated tokens only (reads avoided against the LRU at the "
              "same budget):"]
    if not report.has_weights:
        lines.append("  note: this trace has no router weights (weight = nan), so dropping "
                     "(which compares each weight with frac/k) cannot be replayed, and the "
                     "weight mass of a smaller top-k is unknown. Record the trace with a build "
                     "whose streamer records per-slot weights.")
    for row in report.budgets:
        if row.what_ifs:
            lines.append(f"  at {row.lru.budget_bytes / MIB:.1f} MiB:")
            lines += [_what_if(w) for w in row.what_ifs]
    return "\n".join(lines)
