"""`python -m workbench bench ...`: benchmarks that print ratios measured side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.cli.bench_checks import checked
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
    overhead.set_defaults(run=checked(run_overhead_cmd))
    add_matrix_parser(kinds)

    stream = kinds.add_parser(
        "stream", help="expert streaming: machinery overhead, bigger than memory, I/O "
                       "efficiency, load cost, thread arrangement"
    )
    stream.add_argument("--which", default="machinery,memory,io,load,threads",
                        help="comma-separated: machinery, memory, io, load, threads, routing")
    _add_bench_model(stream)
    stream.add_argument("--repeats", type=int, default=5)
    stream.add_argument("-n", "--tokens", type=int, default=64, help="tokens per run")
    stream.add_argument("-t", "--threads", type=int, default=2)
    stream.add_argument("--lanes", type=int, default=4)
    stream.add_argument("--leave-mib", type=int, default=0,
                        help="memory bench: RAM left available (default: half the model)")
    stream.add_argument("--floor-mb", type=int, default=256,
                        help="memory bench: what the automatic cache leaves free")
    stream.add_argument("--cache-mb", type=int, default=0,
                        help="threads bench: the streamed arms' expert cache (default: one "
                             "that holds every expert)")
    stream.set_defaults(run=checked(run_stream_cmd))

    threads = kinds.add_parser(
        "threads", help="tok/s and the io/compute split at 1, 2, 4, ... threads up to the core "
                        "count, resident and streamed, interleaved, with the chosen default")
    _add_bench_model(threads)
    threads.add_argument("--cache-mb", dest="cache_mbs", default="800,200",
                         help="comma-separated expert cache budgets of the streamed arms, MiB "
                              "(0: one that holds every expert); a no-cache arm always runs")
    threads.add_argument("--counts", default="",
                         help="comma-separated thread counts (default: 1, 2, 4, ... and the "
                              "core count)")
    threads.add_argument("--repeats", type=int, default=3)
    threads.add_argument("-n", "--tokens", type=int, default=64, help="tokens per answer")
    threads.set_defaults(run=checked(run_threads_cmd))

    drop = kinds.add_parser(
        "drop", help="cache-aware expert dropping vs off under a memory balloon, with the "
                     "replay's predicted reads avoided")
    _add_bench_model(drop)
    drop.add_argument("--frac", type=float, default=0.75, help="drop_cold_frac of the drop arm")
    drop.add_argument("--repeats", type=int, default=5)
    drop.add_argument("-n", "--tokens", type=int, default=256, help="tokens per run")
    drop.add_argument("-t", "--threads", type=int, default=2)
    drop.add_argument("--leave-mib", type=int, default=0,
                      help="RAM left available by the balloon (default: a third of the model)")
    drop.add_argument("--floor-mb", type=int, default=256,
                      help="what the automatic cache leaves free")
    drop.add_argument("--no-balloon", dest="balloon", action="store_false",
                      help="no memory balloon (a smoke test of the plumbing, not a measurement)")
    drop.set_defaults(run=checked(run_drop_cmd))

    spec = kinds.add_parser("spec", help="speculative decoding vs plain greedy decoding on a "
                                         "task where drafts hit and one where they miss")
    add_arguments(spec)
    spec.add_argument("--tasks", default="quote,code,free",
                      help="comma-separated: quote, code, free")
    spec.add_argument("--drafter", choices=("ngram", "draft"), default="ngram",
                      help="the speculating arm's source (draft needs --spec-draft-model)")
    spec.add_argument("--repeats", type=int, default=5, help="pairs per task, interleaved")
    spec.add_argument("--moe", action="store_true",
                      help="also measure a streamed synthetic MoE's expert reads with speculation")
    spec.set_defaults(run=checked(run_spec_cmd))

    policy = kinds.add_parser(
        "policy", help="expert cache policies vs LRU (and Belady), prefetch on/off, cache off "
                       "vs O_DIRECT bandwidth, on the bench model")
    _add_bench_model(policy)
    policy.add_argument("--budgets", default="200,800",
                        help="comma-separated cache budgets in MiB (the first picks the best)")
    policy.add_argument("--repeats", type=int, default=4)
    policy.add_argument("-n", "--tokens", type=int, default=64, help="tokens per run")
    policy.add_argument("-t", "--threads", type=int, default=2)
    policy.add_argument("--lanes", type=int, default=4)
    policy.add_argument("--skip", default="",
                        help="comma-separated parts to leave out: prefetch, io")
    policy.set_defaults(run=checked(run_policy_cmd))

    curve = kinds.add_parser(
        "curve", help="speed/quality curve of dropping, top-k and substitution at a cache of "
                      "about two tokens' expert demand, each arm scored against the lossless "
                      "reference")
    _add_bench_model(curve)
    curve.add_argument("--text", type=Path, metavar="FILE",
                       help="the UTF-8 text to score (default: the bundled reference text)")
    curve.add_argument("-n", "--tokens", type=int, default=128,
                       help="positions of the text scored per arm (128)")
    curve.add_argument("-t", "--threads", type=int, default=2)
    curve.set_defaults(run=checked(run_curve_cmd))

    kv = kinds.add_parser("kv", help="time to first token with conversations' KV states kept "
                                     "(memory, disk) vs re-read")
    add_arguments(kv)
    kv.add_argument("--repeats", type=int, default=5, help="pairs per comparison, interleaved")
    kv.add_argument("--history-tokens", type=int, default=2000,
                    help="length of each conversation (tokens)")
    kv.set_defaults(run=checked(run_kv_cmd))


def on_bench_model(config: Config) -> Config:
    """Benchmarks run on gemma-3-270m unless given a model: docs/benchmarks.md's figures were
    measured on it, and a new default (the chat model) must not silently change what they mean."""
    if config.model:
        return config
    from workbench.embedded import gemma_model_path

    return config.replace(model=str(gemma_model_path()))


def run_spec_cmd(args: argparse.Namespace) -> int:
    from workbench.bench import spec as spec_bench
    from workbench.embedded import chat_model_path

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    # The chat model: the tasks are instructions, and docs/benchmarks.md's figures name it.
    config = config_from_args(args, Config(n_threads=2, n_predict=160))
    if not config.model:
        config = config.replace(model=str(chat_model_path()))
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in spec_bench.TASKS]
    if unknown:
        print(f"error: unknown task {unknown[0]!r}; choose from {', '.join(spec_bench.TASKS)}",
              file=sys.stderr)
        return 2
    results = spec_bench.spec_bench(config, tasks=tasks, spec=args.drafter,
                                    repeats=args.repeats, log=log)
    for r in results:
        print(r.line())
    if args.moe:
        import tempfile

        from workbench.moe.synth import write_synthetic_moe

        # The tiny synthetic MoE suffices: the figure is reads per token, not speed.
        with tempfile.TemporaryDirectory() as tmp:
            model = write_synthetic_moe(Path(tmp) / "tiny-moe.gguf", arch="qwen3moe",
                                        size="tiny")[0]
            moe = spec_bench.moe_io_bench(model, repeats=args.repeats, n_tokens=48,
                                          threads=config.n_threads, log=log)
        print(moe.line())
        print(moe.io_line())
    return 0


def run_curve_cmd(args: argparse.Namespace) -> int:
    from workbench.bench import stream
    from workbench.bench.curve import format_curve, run_curve
    from workbench.bench.quality import QualityError, default_text_path, read_text
    from workbench.engine.requests import SessionError

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    text = args.text or default_text_path()
    try:
        read_text(text)  # before the bench model is generated: a bad text costs nothing
        model = args.model or stream.bench_model(args.gib)
        curve = run_curve(model, text, tokens=args.tokens, threads=args.threads, log=log)
    except (QualityError, SessionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_curve(curve), end="")
    return 0


def run_kv_cmd(args: argparse.Namespace) -> int:
    from workbench.bench.kv import format_report, run_kv

    config = on_bench_model(config_from_args(args, Config(n_threads=2)))
    report = run_kv(config, repeats=args.repeats, history_tokens=args.history_tokens,
                    log=lambda line: print(line, file=sys.stderr, flush=True))
    for line in format_report(report):
        print(line)
    print(report.last_line())
    return 0


def run_drop_cmd(args: argparse.Namespace) -> int:
    from workbench.bench import drop, stream

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if not 0 < args.frac <= 1:
        print("error: --frac must be in (0, 1] (0.75 drops cold experts weighted under 3/4 of "
              "an even share)", file=sys.stderr)
        return 2
    if not drop.has_drop_setting():
        print(f"bench drop: skipped: this build has no `{drop.DROP_SETTING}` setting "
              "(cache-aware dropping has not landed), so there is nothing to compare")
        return 0
    model = args.model or stream.bench_model(args.gib)
    leave = args.leave_mib or model.stat().st_size // (3 << 20)
    report = drop.drop_bench(model, frac=args.frac, leave_mib=leave, floor_mb=args.floor_mb,
                             repeats=args.repeats, n_tokens=args.tokens, threads=args.threads,
                             balloon=args.balloon, log=log)
    print("\n".join(report.lines()))
    return 0


def run_threads_cmd(args: argparse.Namespace) -> int:
    from workbench.bench import stream
    from workbench.bench.threads import run_threads
    from workbench.cli.bench_checks import number_list

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    model = args.model or stream.bench_model(args.gib)
    lines = run_threads(model, cache_mbs=number_list(args.cache_mbs),
                        counts=number_list(args.counts), repeats=args.repeats,
                        n_tokens=args.tokens, log=log)
    print("\n".join(lines))
    return 0


def run_policy_cmd(args: argparse.Namespace) -> int:
    from workbench.bench import stream
    from workbench.bench.policy import policy_bench

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        budgets = tuple(int(b) for b in args.budgets.split(",") if b.strip())
    except ValueError:
        print(f"error: --budgets takes MiB as whole numbers, e.g. 200,800 (got {args.budgets!r})",
              file=sys.stderr)
        return 2
    if not budgets or min(budgets) <= 0:
        print("error: --budgets needs at least one budget above 0 MiB", file=sys.stderr)
        return 2
    skip = {p.strip() for p in args.skip.split(",") if p.strip()}
    model = args.model or stream.bench_model(args.gib)
    lines = policy_bench(model, budgets_mib=budgets, repeats=args.repeats, n_tokens=args.tokens,
                         threads=args.threads, lanes=args.lanes, log=log,
                         prefetch="prefetch" not in skip, io="io" not in skip)
    print("\n".join(lines))
    return 0


def run_overhead_cmd(args: argparse.Namespace) -> int:
    from workbench.bench.overhead import run_overhead

    config = on_bench_model(config_from_args(args, Config(n_predict=256)))
    report = run_overhead(
        config, repeats=args.repeats, warmup=args.warmup,
        log=lambda line: print(line, file=sys.stderr),
    )
    print(report.last_line())
    return 0


def run_stream_cmd(args: argparse.Namespace) -> int:
    from workbench.bench import stream

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    model = args.model or stream.bench_model(args.gib)
    lines = []
    which = [w.strip() for w in args.which.split(",") if w.strip()]
    for name in which:
        if name == "machinery":
            lines.append(stream.machinery(model, repeats=args.repeats, n_tokens=args.tokens,
                                          threads=args.threads, log=log))
        elif name == "memory":
            leave = args.leave_mib or model.stat().st_size // (2 << 20)
            lines.append(stream.bigger_than_memory(
                model, leave_mib=leave, floor_mb=args.floor_mb, repeats=args.repeats,
                n_tokens=args.tokens, threads=args.threads, log=log))
        elif name == "io":
            lines.append(stream.io_efficiency(model, lanes=args.lanes, repeats=args.repeats,
                                              n_tokens=args.tokens, threads=args.threads, log=log))
        elif name == "load":
            from workbench.bench.stream_load import load_cost

            leave = args.leave_mib or model.stat().st_size // (2 << 20)
            lines.append(load_cost(model, leave_mib=leave, repeats=args.repeats,
                                   threads=args.threads, log=log))
        elif name == "threads":
            lines.append(stream.entry_threads(model, cache_mb=args.cache_mb,
                                              repeats=args.repeats, n_tokens=args.tokens,
                                              threads=args.threads, log=log))
        elif name == "routing":
            lines.append(stream.routing(model, n_tokens=args.tokens, threads=args.threads,
                                        log=log))
        else:
            print(f"error: unknown benchmark {name!r} (machinery, memory, io, load, threads, "
                  "routing)",
                  file=sys.stderr)
            return 2
        log(lines[-1])
    print("\n".join(lines))
    return 0


def add_matrix_parser(kinds: argparse._SubParsersAction) -> None:
    matrix = kinds.add_parser(
        "matrix", help="named presets over a prompt set, interleaved; prints the compare table",
        description="Run every preset (an arm) over the prompt set: a warm-up per arm, then "
        "repeats in interleaved order, one metrics CSV per run, then the compare table. The "
        "settings flags below are the base every preset overrides (default: 256 tokens, greedy, "
        "raw text).",
    )
    matrix.add_argument("--preset", action="append", default=[], metavar="NAME=key=value,...",
                        help="an arm: a name and the settings it overrides (repeatable)")
    matrix.add_argument("--preset-file", action="append", default=[], metavar="FILE",
                        help='presets as JSON: {"name": {"setting": value, ...}} (repeatable)')
    matrix.add_argument("--prompts", metavar="FILE",
                        help="prompts, one a line (default: resources/prompts/default.txt)")
    matrix.add_argument("--repeats", type=int, default=5, help="measured runs per arm (5)")
    matrix.add_argument("--no-warmup", dest="warmup", action="store_false",
                        help="skip the unmeasured warm-up run of each arm")
    matrix.add_argument("--order", choices=("abab", "abba", "shuffle"), default="abab",
                        help="arm order within each repeat (abab)")
    matrix.add_argument("--order-seed", type=int, default=0, help="seed of --order shuffle (0)")
    matrix.add_argument("--fresh-process", action="store_true",
                        help="run every run in its own Python process")
    matrix.add_argument("--cold", action="store_true",
                        help="drop the model file from the page cache before every run")
    matrix.add_argument("--trim", type=int, default=0, metavar="N",
                        help="leave the first N tokens of every turn out of the table (0)")
    matrix.add_argument("-o", "--out", type=Path, metavar="DIR",
                        help="output directory, made if missing (its parent must exist; "
                             "default: a new one under the data directory)")
    matrix.add_argument("--score", action="store_true",
                        help="also score every arm's quality against its lossless reference "
                             "(perplexity, KL, agreement) and print speed vs KL with the Pareto "
                             "front (quality.txt, quality.json, pareto.svg)")
    matrix.add_argument("--score-text", type=Path, metavar="FILE",
                        help="--score: the UTF-8 text to read (default: the bundled reference "
                             "text)")
    matrix.add_argument("--score-tokens", type=int, default=256, metavar="N",
                        help="--score: positions of the text scored per arm (256)")
    add_arguments(matrix)
    matrix.set_defaults(run=checked(run_matrix_cmd))


def run_matrix_cmd(args: argparse.Namespace) -> int:
    import time

    from workbench.bench.arms import DEFAULT_PROMPTS, ArmError, read_prompts
    from workbench.bench.matrix import MatrixError, MatrixPlan, default_base, run_matrix
    from workbench.paths import data_dir
    from workbench.presets import PresetError, load_preset_file, parse_preset

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    out = args.out or data_dir() / "bench" / time.strftime("matrix-%Y%m%d-%H%M%S")
    try:
        presets = [parse_preset(text) for text in args.preset]
        for path in args.preset_file:
            presets += load_preset_file(path)
        plan = MatrixPlan(
            presets, read_prompts(args.prompts or DEFAULT_PROMPTS), out,
            base=on_bench_model(config_from_args(args, default_base())), repeats=args.repeats,
            warmup=args.warmup, order=args.order, seed=args.order_seed,
            fresh_process=args.fresh_process, cold=args.cold, trim=args.trim,
            make_parents=args.out is None,  # the default is under the data directory: ours
            score=args.score, score_text=args.score_text, score_tokens=args.score_tokens,
        )
        result = run_matrix(plan, log=log)
    except (PresetError, ArmError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MatrixError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(result.text, end="")
    scored = ", quality.txt, quality.json, pareto.svg" if result.quality else ""
    log(f"{len(result.runs)} metrics files, matrix.json and compare.txt{scored} in {out}")
    return 0


def _add_bench_model(parser: argparse.ArgumentParser) -> None:
    """The streamed benches' model: a given MoE GGUF, or the generated bench model."""
    parser.add_argument("-m", "--model", type=Path,
                        help="MoE GGUF to use (default: a generated bench-size synthetic MoE)")
    parser.add_argument("--gib", type=float, default=2.0,
                        help="size of the generated synthetic model's experts (GiB)")
