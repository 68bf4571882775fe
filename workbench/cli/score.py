"""`workbench score [TEXT] [settings...]`: what the settings cost in quality against the lossless
reference, read teacher-forced one token per decode (docs/quality.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workbench.bench.stats import Interval
from workbench.config import Config
from workbench.config_cli import add_arguments, config_from_args


def add_score_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score", help="what the settings cost in quality: perplexity, KL and top-1 agreement "
                      "against the lossless reference, teacher-forced one token per decode")
    p.add_argument("text", nargs="?", type=Path, default=None, metavar="TEXT",
                   help="a UTF-8 text file to read (default: the bundled reference text, "
                        "resources/quality/reference.txt); cut to the context with a note")
    p.add_argument("--tokens", type=int, default=None, metavar="N",
                   help="score at most N positions (default: the whole text, up to the context)")
    p.add_argument("--batched", type=int, default=0, metavar="N",
                   help="read N positions per decode: faster, and refused for settings that "
                        "depend on the expert cache's state (dropping), where it is wrong")
    p.add_argument("--streamed-reference", action="store_true",
                   help="read the reference streamed as the settings say (nothing lost) "
                        "instead of whole: for a model too big to read whole")
    p.add_argument("--choices", nargs="?", type=Path, const="", default=None, metavar="FILE",
                   help="score a JSONL question file instead (question, choices, answer); "
                        "without FILE the bundled smoke-test set")
    p.add_argument("--by", choices=("letter", "text"), default="letter",
                   help="--choices: score each choice's letter (default) or its whole text")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--db", metavar="FILE", type=Path,
                   help="record the scored run in this store (default: the window's, "
                        "workbench.db in the data folder), where the Runs page, `runs list` and "
                        "the settings panel's costs find it")
    p.add_argument("--no-record", action="store_true",
                   help="print the figures only; keep no run")
    add_arguments(p)
    p.set_defaults(run=run_score_cmd)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_score_cmd(args: argparse.Namespace) -> int:
    from workbench.bench import quality
    from workbench.engine.requests import SessionError
    from workbench.engine.warm_start import warm_start_dir

    config = config_from_args(args, Config(n_threads=Config().n_threads))
    if args.tokens is not None and args.tokens < 1:
        print("error: --tokens must be at least 1", file=sys.stderr)
        return 2
    if args.batched < 0:
        print("error: --batched must be a number of positions, 2 or more", file=sys.stderr)
        return 2
    if args.db is not None and not args.no_record:
        from workbench.file_kind import regular_file

        try:  # refused before minutes of scoring, not after
            regular_file(args.db, "a store file")
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.choices is not None:
        return _run_choices(args, config)
    path = args.text or quality.default_text_path()
    try:
        text = quality.read_text(path)
        last = [-1]

        def progress(phase: str, done: int, total: int) -> None:
            pct = 100 * done // total
            if pct // 10 != last[0] or done == total:
                last[0] = pct // 10
                _log(f"[{phase}] {done}/{total} positions")

        report = quality.score_text(config, text, text_name=path.name, max_tokens=args.tokens,
                                    batched=args.batched,
                                    streamed_reference=args.streamed_reference,
                                    progress=progress, warm_dir=warm_start_dir())
    except (quality.QualityError, SessionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scoring was interrupted; nothing was scored", file=sys.stderr)
        return 130
    run_id = None if args.no_record else _record(args, report)
    if args.json:
        print(json.dumps({**report.to_dict(), "run": run_id}, indent=2))
    else:
        print("\n".join(report_lines(report)))
        if run_id is not None:
            print(f"recorded as run {run_id} (`workbench runs show {run_id}`)")
    return 0 if run_id is not None or args.no_record else 1


def _record(args: argparse.Namespace, report, save=None) -> int | None:
    """The scored run saved to the store (by `save`, default the scored text's saver); None
    (and one line on stderr) when it could not be: the figures are printed either way."""
    import sqlite3

    from workbench.bench.quality import save_scored_run
    from workbench.cli.store_access import CommandError, open_store
    from workbench.store import StoreFault

    try:
        with open_store(args, create=True) as store:
            return (save or save_scored_run)(store, report)
    except (CommandError, StoreFault, sqlite3.Error, OSError) as exc:
        print(f"error: the scored run was not recorded: {exc}", file=sys.stderr)
        return None


def _iv(iv: Interval, fmt: str = ".4f", scale: float = 1.0) -> str:
    return (f"{iv.estimate * scale:{fmt}} [{iv.low * scale:{fmt}}, {iv.high * scale:{fmt}}]")


def _settings_text(settings: dict[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items() if k != "model") or "defaults"


def report_lines(report) -> list[str]:  # report: bench.quality.QualityReport
    f = report.figures
    s, r = report.setting, report.reference
    settings = _settings_text(s.settings)
    lines = [f"text: {report.text_name}, {report.n_scored} positions scored "
             f"({report.n_text_tokens} tokens in the text); {report.mode}"]
    lines += [f"note: {n}" for n in report.notes]
    lines += [
        f"setting:   {settings}",
        f"reference: {_settings_text(r.settings)}",
        "figure                 estimate [95 % interval]",
        f"perplexity setting     {_iv(f.ppl_setting, '.3f')}",
        f"perplexity reference   {_iv(f.ppl_reference, '.3f')}",
        f"perplexity ratio       {_iv(f.ppl_ratio, '.4f')}  (setting / reference, paired)",
        f"KL mean (nats)         {_iv(f.kl_mean, '.5f')}",
        f"KL p95 (nats)          {_iv(f.kl_p95, '.5f')}   max {f.kl_max:.5f}",
        f"top-1 agreement        {_iv(f.agreement, '.2f', 100)} %   argmax flips "
        f"{f.flips}/{f.n_positions} ({100 * f.flips / f.n_positions:.2f} %)",
        f"top-1 = next token     setting {_iv(f.top1_setting, '.2f', 100)} %, reference "
        f"{_iv(f.top1_reference, '.2f', 100)} %",
        f"tok/s setting          {_iv(s.tok_s, '.1f')}  ({s.forced.decodes} decodes, "
        f"{s.forced.decode_seconds:.2f} s of decode)",
        f"tok/s reference        {_iv(r.tok_s, '.1f')}  ({r.forced.decodes} decodes, "
        f"{r.forced.decode_seconds:.2f} s of decode)",
        f"speed ratio            {report.speedup:.3f}x (setting / reference)",
        f"comparison overhead    {report.kl_ms_per_position:.3f} ms per position (log-softmax "
        "and KL over the vocabulary; outside the decode brackets, not in tok/s)",
    ]
    if s.forced.read_bytes >= 0:
        hit = f", hit rate {s.forced.hit_rate:.1f} %" if s.forced.hit_rate >= 0 else ""
        lines.append(f"expert reads           {s.forced.read_bytes / (1 << 20):.1f} MiB{hit}")
    return lines


def _run_choices(args: argparse.Namespace, config: Config) -> int:
    from workbench.bench import choices
    from workbench.bench.quality import QualityError
    from workbench.engine.requests import SessionError

    path = args.choices if str(args.choices) else choices.default_choices_path()
    try:
        questions = choices.read_questions(path)

        def progress(phase: str, done: int, total: int) -> None:
            if done == total or done % max(1, total // 5) == 0:
                _log(f"[{phase}] {done}/{total} questions")

        report = choices.score_choices(config, questions, name=path.name, by=args.by,
                                       progress=progress)
    except (QualityError, SessionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("scoring was interrupted; nothing was scored", file=sys.stderr)
        return 130
    run_id = None if args.no_record else _record(args, report, choices.save_choices_run)
    if args.json:
        print(json.dumps({**report.to_dict(), "run": run_id}, indent=2))
    else:
        print("\n".join(report.lines()))
        if run_id is not None:
            print(f"recorded as run {run_id} (`workbench runs show {run_id}`)")
    return 0 if run_id is not None or args.no_record else 1
