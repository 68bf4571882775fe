"""`python -m workbench runs list|show|compare`: the window's recorded runs from the terminal,
over the same store (cli/store_access.py), with the figures the window's Runs page shows."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

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
from workbench.engine.summary_labels import CACHE_HIT, EXPERTS_READ, RATE, TTFT


def add_runs_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "runs", help="list, show or compare the runs the window recorded",
        description="Every answer the window generates is a run: its settings, model, summary "
        "and per-token rows. Safe while the window is open (the same store file, whose locking "
        "keeps each one's writes whole).",
    )
    verbs = p.add_subparsers(dest="verb", metavar="ACTION", required=True)

    ls = verbs.add_parser("list", help="runs, newest first",
                          description="One line per run: id, when, model, tokens, decode "
                          "tok/s, time to first token, and its conversation.")
    ls.add_argument("--conversation", type=positive_id, metavar="ID",
                    help="only the runs of this conversation")
    ls.add_argument("--model", metavar="NAME", help="only runs of the model with this name")
    kind = ls.add_mutually_exclusive_group()
    kind.add_argument("--headless", action="store_true",
                      help="only runs without an answer (benches, matrix runs)")
    kind.add_argument("--chat", action="store_true", help="only runs that produced an answer")
    ls.add_argument("--limit", type=positive_id, metavar="N", help="at most N runs")
    add_db_argument(ls)
    ls.set_defaults(run=guarded(run_list))

    show = verbs.add_parser(
        "show", help="one run: settings, summary and its slow tokens explained",
        description="The run's model, settings and summary figures, and its slow tokens with "
        "their causes (as `workbench explain` finds them). --csv writes its metrics file, the "
        "one the window's Runs page exports.")
    show.add_argument("id", type=positive_id, metavar="ID", help="the run (see runs list)")
    show.add_argument("--csv", metavar="FILE", help="also write the run as a metrics file")
    add_db_argument(show)
    show.set_defaults(run=guarded(run_show))

    cmp = verbs.add_parser(
        "compare", help="runs side by side with 95 %% intervals, as `compare` does for files",
        description="The compare table of stored runs: decode rate, wall percentiles, TTFT, "
        "reads, hit rate, faults, each with its interval and its ratio to the first run, and "
        "the settings that differ.")
    cmp.add_argument("ids", nargs="+", type=positive_id, metavar="ID",
                     help="two or more runs (see runs list); the first is the base")
    cmp.add_argument("--trim", type=int, default=0, metavar="N",
                     help="leave out the first N tokens of every turn as warm-up (default: 0)")
    cmp.add_argument("--group", action="store_true",
                     help="runs of one configuration become repeats of one arm")
    add_db_argument(cmp)
    cmp.set_defaults(run=guarded(run_compare))


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and value >= 0 else math.nan


def _fmt(value: float, spec: str) -> str:
    if math.isnan(value):
        return "—"
    return format(int(value), spec) if spec == "d" else format(value, spec)


def run_list(args: argparse.Namespace) -> int:
    from workbench.bench.choices import stored_choices_line
    from workbench.runs.entries import entry_from_run

    headless = True if args.headless else False if args.chat else None
    runs, conversation_of = [], {}
    if not nothing_saved_yet(args):  # a fresh data folder lists nothing, and creates nothing
        with open_store(args) as store:
            runs = store.list_runs(conversation_id=args.conversation, model_name=args.model,
                                   headless=headless, limit=args.limit)
            for run in runs:
                if run.message_id is not None:
                    conversation_of[run.id] = store.get_message(run.message_id).conversation_id
    entries = [entry_from_run(r) for r in runs]
    if args.json:
        print_json([{"id": r.id, "created_at": r.created_at, "label": r.label,
                     "model": e.model, "tokens": e.n_tokens, "tok_s": e.tok_s,
                     "ttft_s": e.ttft_s, "read_mib": e.read_mib, "kind": e.kind,
                     "quality": _cost_json(e.cost),
                     "choices": r.quality.get("choices") if stored_choices_line(r.quality)
                     else None,
                     "conversation": conversation_of.get(r.id),
                     "message": r.message_id, "interrupted": r.interrupted}
                    for r, e in zip(runs, entries, strict=True)])
        return 0
    if not runs:
        print("no runs")
        return 0
    rows = [[str(r.id), when(r.created_at), e.model or "?", str(e.n_tokens), _fmt(e.tok_s, ".1f"),
             _fmt(e.ttft_s, ".2f"), _fmt(e.read_mib, ".2f"), *_cost_cells(e.cost),
             f"conversation {conversation_of[r.id]}" if r.id in conversation_of
             else "headless" + (f" {r.label}" if r.label else "")
             + (f": {line}" if (line := stored_choices_line(r.quality)) else "")]
            for r, e in zip(runs, entries, strict=True)]
    print(table(rows, ["id", "when", "model", "tokens", RATE.unit, TTFT.heading, "MiB/tok",
                       "ppl", "KL nats", "agree %", "of"]))
    if any(e.cost is not None for e in entries):
        print("ppl, KL and agreement: scored runs (`workbench score`) against their lossless "
              "reference, with 95 % intervals")
    return 0


_SUMMARY = (  # (RunSummary field, label, format)
    ("n_generated", "tokens", "d"), (RATE.source, RATE.heading, ".2f"),
    (TTFT.source, TTFT.heading, ".3f"), ("n_prompt", "prompt tokens prefilled", "d"),
    ("prefill_seconds", "prefill s", ".3f"), (CACHE_HIT.source, CACHE_HIT.heading, ".1f"),
    (EXPERTS_READ.source, EXPERTS_READ.heading, ".1f"),
    ("majflt_per_token", "major faults/token", ".2f"),
    ("cpu_s_per_token", "CPU s/token", ".4f"), ("stop_reason", "stopped by", "s"),
)


def _cost_cells(cost: Any) -> list[str]:
    """A scored run's perplexity, KL and agreement with intervals; "—" for any other run."""
    from workbench.bench.compare import format_interval

    if cost is None:
        return ["—"] * 3
    return [format_interval(iv, digits=3) for iv in (cost.ppl, cost.kl_mean, cost.agreement_pct)]


def _cost_json(cost: Any) -> dict[str, Any] | None:
    if cost is None:
        return None
    return {"ppl": _interval(cost.ppl), "ppl_ratio": _interval(cost.ppl_ratio),
            "kl_mean": _interval(cost.kl_mean), "kl_p95": _interval(cost.kl_p95),
            "agreement_pct": _interval(cost.agreement_pct), "speedup": cost.speedup,
            "positions": cost.n_positions, "reference": cost.reference}


def _summary_lines(run: Any) -> list[str]:
    summary = run.run_summary()
    if summary is None:
        return ["summary: none (interrupted)" if run.interrupted else "summary: none yet"]
    out = []
    for name, label, spec in _SUMMARY:
        value = getattr(summary, name)
        if spec == "s":
            out.append(f"  {label}: {value or '—'}")
        else:
            out.append(f"  {label}: {_fmt(_num(value), spec)}")
    return ["summary:", *out]


def _explain(run: Any, rows: list[dict[str, Any]]) -> list[Any]:
    from workbench.bench.stall_report import TurnExplanation, expert_bytes_of, split_turns
    from workbench.bench.stalls import explain_answer, prefill_of
    from workbench.moe.layout import ModelFileError

    size = -1.0
    model = str(run.settings.get("model") or run.model.get("path") or "")
    if model:
        try:
            size = expert_bytes_of(model)
        except (ModelFileError, OSError):  # the model file moved or changed: no count
            size = -1.0
    threads = run.settings.get("n_threads")
    threads = threads if isinstance(threads, int) and not isinstance(threads, bool) else -1
    prefill = prefill_of(run.summary)
    return [TurnExplanation(turn, explain_answer(turn_rows, prefill=prefill, expert_bytes=size,
                                                 threads=threads))
            for turn, turn_rows in split_turns(rows)]


def run_show(args: argparse.Namespace) -> int:
    from workbench.bench.stall_report import format_report, report_json
    from workbench.bench.stalls import SLOW_FACTOR

    if args.csv:
        from workbench.atomic_write import OutputFileError, check_output_path

        try:
            check_output_path(args.csv)
        except OutputFileError as exc:
            raise CommandError(str(exc)) from exc
    with open_store(args) as store:
        run = store.get_run(args.id)
        rows = store.token_rows(args.id)
        conversation = (store.get_message(run.message_id).conversation_id
                        if run.message_id is not None else None)
    turns = _explain(run, rows)
    if args.csv:
        from workbench.runs.run_csv import write_run_csv

        write_run_csv(args.csv, run, rows)
        print(f"wrote run {run.id} to {args.csv}", file=sys.stderr)
    if args.json:
        print_json({"id": run.id, "created_at": run.created_at, "label": run.label,
                    "conversation": conversation, "message": run.message_id,
                    "model": run.model, "engine_version": run.engine_version,
                    "settings": run.settings, "summary": run.summary,
                    "quality": {k: v for k, v in run.quality.items() if k != "series"},
                    "tokens": len(rows),
                    "explain": report_json(turns, f"run {run.id}", SLOW_FACTOR)["turns"]})
        return 0
    model = run.model.get("name") or run.model.get("path") or "?"
    of = f"conversation {conversation}" if conversation is not None else "headless"
    print(f"run {run.id} ({of}), {when(run.created_at)}: {model}, engine {run.engine_version}")
    keys = ("n_threads", "n_ctx", "moe_stream", "cache_mb", "cache_auto", "drop_cold_frac",
            "temp", "n_predict")
    print("settings: " + ", ".join(f"{k}={run.settings[k]}" for k in keys if k in run.settings))
    print("\n".join(_summary_lines(run)))
    if run.scored:
        from workbench.bench.quality_cost import QualityCost

        cost = QualityCost.from_record(run.quality)
        assert cost is not None
        print(f"quality ({run.quality.get('text', '?')}, {run.quality.get('mode', '?')}): "
              f"{cost.summary()}")
        print("  " + cost.detail().replace("\n", "\n  "))
    from workbench.bench.choices import stored_choices_line

    if line := stored_choices_line(run.quality):
        print(f"choices ({run.quality['choices'].get('by', '?')}): {line}")
    if rows:
        print()
        print(format_report(turns, f"run {run.id}", SLOW_FACTOR, 10), end="")
    else:
        print("no token rows")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from workbench.bench.compare import compare, format_table
    from workbench.bench.figures import RunFigures
    from workbench.runs.run_csv import run_metrics

    if len(args.ids) < 2:
        raise CommandError("compare needs two runs or more")
    if args.trim < 0:
        raise CommandError("--trim must be 0 or more")
    figures = []
    with open_store(args) as store:
        for run_id in args.ids:
            run = store.get_run(run_id)
            rows = store.token_rows(run_id)
            if not rows:
                raise CommandError(f"run {run_id} has no token rows to compare")
            figures.append(RunFigures.from_metrics(run_metrics(run, rows), args.trim,
                                                   source=f"run {run_id}",
                                                   label=f"#{run_id}", quality=run.quality))
    result = compare(figures, group=args.group)
    if args.json:
        print_json({
            "arms": [{"label": a.label, "runs": [r.source for r in a.runs],
                      "tokens": a.n_tokens} for a in result.arms],
            "figures": [{"key": row.figure.key, "label": row.figure.label,
                         "unit": row.figure.unit,
                         "cells": [{"value": _interval(c.value), "ratio": _interval(c.ratio)}
                                   for c in row.cells]} for row in result.rows],
            "config_difference": {d.key: list(d.values) for d in result.config_diff},
            "lossy_difference": [d.key for d in result.config_diff if d.lossy],
        })
        return 0
    print(format_table(result), end="")
    return 0


def _interval(iv: Any) -> dict[str, float] | None:
    if iv is None:
        return None
    return {"estimate": iv.estimate, "low": iv.low, "high": iv.high}
