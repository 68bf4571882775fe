"""`python -m workbench chat`: one-shot (-p) or interactive multi-turn chat on the terminal.

The model is loaded, used and closed on one engine thread (engine/engine_thread.py): one OpenMP
pool for every decode (the session refuses calls from any other thread), and Ctrl-C
reaches the main thread at once: during the load it cancels the load and the command exits
cleanly; during an answer it stops the answer (not the program) through the native abort flag.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from workbench.cli.held_keys import keys_held
from workbench.config import Config
from workbench.config_cli import add_arguments, typed_settings
from workbench.engine import wait_policy
from workbench.engine.engine_thread import EngineThread
from workbench.engine.metrics import UNMEASURED, RunSummary
from workbench.engine.opening import Opening, decide, settle_threads
from workbench.engine.requests import GenerateRequest, GenerateResult, TokenEvent
from workbench.engine.thread_choice import ThreadChoice
from workbench.engine.wait_policy import WaitChoice

if TYPE_CHECKING:
    from workbench.engine.sinks import CsvMetricsSink


def add_chat_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat with a model on the terminal")
    add_arguments(p)
    p.add_argument("-p", "--prompt", help="one-shot: send this text, print the answer, exit")
    p.add_argument("--csv", metavar="FILE",
                   help="write per-token metrics to FILE (its directory must exist; FILE "
                        "appears, whole, when the chat ends)")
    p.add_argument("--image", action="append", default=[], metavar="FILE",
                   help="one-shot: show this image to the model with the prompt (repeatable; "
                        "needs --mmproj, or an mmproj*.gguf beside the model)")
    p.add_argument("--progress", action="store_true",
                   help="print one JSON line per token to stderr")
    p.add_argument("--route-trace", metavar="FILE",
                   help="record every layer's routing to FILE, a route trace for `replay` "
                        "(needs --moe-stream; FILE appears, whole, when the chat ends)")
    p.add_argument("--route-scores", action="store_true",
                   help="with --route-trace: also record each token's full router score row "
                        "(n_expert numbers per layer and token), so `replay --substitute` can "
                        "predict what cache-aware substitution would do")
    p.set_defaults(run=run_chat)


def run_chat(args: argparse.Namespace) -> int:
    from workbench.atomic_write import OutputFileError, check_output_path
    from workbench.engine.sinks import CsvMetricsSink

    opening = chat_opening(args)
    config = opening.config
    route_trace = getattr(args, "route_trace", None)
    if route_trace and not config.moe_stream:
        print("error: --route-trace needs --moe-stream: the expert streamer is what records "
              "the routing", file=sys.stderr)
        return 2
    if getattr(args, "route_scores", False) and not route_trace:
        print("error: --route-scores records into the route trace: give --route-trace FILE "
              "too", file=sys.stderr)
        return 2
    try:
        images, config = _images(args, config)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.images = images
    try:
        # Before the load: a --csv that cannot be written is refused in a second, not after.
        if route_trace:
            check_output_path(route_trace)
        sink = CsvMetricsSink(args.csv) if args.csv else None
    except OutputFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    metrics = _MetricsFile(sink)
    ctrl_c_interrupts()
    try:
        code = _chat(args, config, metrics, opening.measures_threads)
    except BaseException:
        metrics.close(1)
        raise
    return metrics.close(code)


def chat_opening(args: argparse.Namespace) -> Opening:
    """What `chat` opens with (engine/opening.py): the model's defaults, then the flags typed;
    no window, so nothing remembered."""
    return decide(getattr(args, "model", ""), typed=typed_settings(args))


def ctrl_c_interrupts(terminal: bool | None = None) -> bool:
    """Make Ctrl-C stop an answer even when this process was started with SIGINT ignored.

    A shell starts a script's `&` jobs (and a script's children) with SIGINT ignored, and Python
    then leaves it ignored: the terminal's Ctrl-C reached the process but did nothing, so an
    answer could not be stopped. Where a terminal is attached (someone can press Ctrl-C) the
    handler is set explicitly; without one (a pipeline, a service) an inherited choice stands.
    True when the handler was set."""
    import signal

    if terminal is None:
        terminal = any(s is not None and s.isatty() for s in (sys.stdin, sys.stderr))
    if not terminal or threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return True


def _images(args: argparse.Namespace, config: Config) -> tuple[list, Config]:
    """The --image files, read and checked before the load (ImageInputError, a ValueError),
    and the config with the projector found beside the model when none was given."""
    if not args.image:
        return [], config
    from pathlib import Path

    from workbench.engine.images import read_image
    from workbench.moe.projector import find_beside

    if args.prompt is None:
        raise ValueError("--image goes with a one-shot prompt (-p TEXT)")
    images = [read_image(path) for path in args.image]
    if not config.mmproj and config.model:
        beside = find_beside(Path(config.model))
        if beside is None:
            raise ValueError(
                f"--image needs the model's image projector: pass --mmproj PROJ.gguf (no "
                f"mmproj*.gguf was found beside {Path(config.model).name})")
        print(f"note: using the image projector beside the model: {beside.name}",
              file=sys.stderr)
        config = config.replace(mmproj=str(beside))
    return images, config


class _MetricsFile:
    """The --csv sink, if any: its failure is reported once, as soon as a turn shows it, and
    makes the exit code non-zero; the chat itself goes on."""

    def __init__(self, sink: CsvMetricsSink | None) -> None:
        self.sink = sink
        self.reported = False

    def check(self) -> None:
        if self.sink is not None and self.sink.error is not None and not self.reported:
            self.reported = True
            print(f"error: {self.sink.error}", file=sys.stderr)

    def discard(self, why: str) -> None:
        if self.sink is not None:
            self.sink.discard()
            print(f"note: {self.sink.path} was not written ({why})", file=sys.stderr)

    def close(self, code: int) -> int:
        from workbench.atomic_write import OutputFileError

        if self.sink is None:
            return code
        try:
            self.sink.close()
        except OutputFileError:
            self.check()
            return code or 1
        return code


def _chat(args: argparse.Namespace, config: Config, metrics: _MetricsFile,
          measure_threads: bool = False) -> int:
    from workbench.engine.requests import SessionError
    from workbench.engine.session import Session
    from workbench.engine.warm_start import warm_start_dir

    engine = EngineThread()
    cancel_load = threading.Event()

    def interrupt_load() -> None:
        if not cancel_load.is_set():
            print("\n[cancelling the load]", file=sys.stderr)
        cancel_load.set()

    def load() -> Session:
        # Returning False from the progress callback makes llama.cpp abandon the load.
        session = Session.open(config, sink=metrics.sink,
                               progress=lambda _f: not cancel_load.is_set(),
                               record_routes=bool(getattr(args, "route_trace", None)),
                               record_route_scores=bool(getattr(args, "route_scores", False)),
                               warm_dir=warm_start_dir())
        settle_threads(session, measure=measure_threads)  # on this engine thread
        return session

    try:
        try:
            session = engine.call(load, interrupt_load)
        except SessionError as exc:
            if cancel_load.is_set():
                print("loading was cancelled; nothing was loaded", file=sys.stderr)
                metrics.discard("the load was cancelled")
                return 130
            print(f"error: {exc}", file=sys.stderr)
            metrics.discard("the model did not load")
            return 1
        if cancel_load.is_set():  # Ctrl-C after the last progress call: the load finished
            engine.call(session.close, lambda: None)
            print("loading was cancelled", file=sys.stderr)
            metrics.discard("the load was cancelled")
            return 130
        for warning in session.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if session.streaming is not None:
            print(streaming_banner(session), file=sys.stderr)
        if session.thread_choice is not None:
            print(f"threads: {session.thread_choice.describe()}", file=sys.stderr)
        try:
            if args.prompt is not None:
                request = GenerateRequest(text=args.prompt, images=tuple(args.images))
                result = _turn(engine, session, request, args.progress)
                metrics.check()
                return 0 if result.ok or result.stopped else 1
            return _interactive(engine, session, args.progress, metrics.check)
        finally:
            if getattr(args, "route_trace", None) and session.streaming is not None:
                _write_route_trace(engine, session, args.route_trace)
            engine.call(session.close, lambda: None)
    finally:
        engine.stop()


def _write_route_trace(engine: EngineThread, session, path: str) -> None:
    from workbench.atomic_write import OutputFileError
    from workbench.moe.route_trace import write_trace

    trace = engine.call(session.streaming.route_trace, lambda: None)
    try:
        write_trace(path, trace)
    except OutputFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return
    print(f"wrote the route trace {path} ({len(trace.loads)} layer loads); "
          f"see it with: workbench replay {path}", file=sys.stderr)


# The interactive commands, declared once: /help prints this table, the loop dispatches on it.
COMMANDS: dict[str, str] = {
    "/help": "list these commands",
    "/new": "start a new chat (the model forgets this one)",
    "/quit": "leave (also /exit, or Ctrl-D on an empty line)",
}
_ALIASES = {"/exit": "/quit", "/?": "/help"}


def help_text() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name.ljust(width)}  {what}" for name, what in COMMANDS.items()]
    keys = ["  Ctrl-C   stops an answer; at the prompt it clears the line",
            "  Ctrl-D   leaves, on an empty line"]
    return "\n".join(["Commands:", *lines, "Keys:", *keys])


def command_of(text: str) -> str | None:
    """The command a line is ("/help"), "" for an unknown one-word /word, None for a message.
    A message may start with a slash ("/usr is where?"); only one bare /word is a command."""
    word = text.strip()
    if not word.startswith("/") or len(word.split()) != 1:
        return None
    word = _ALIASES.get(word.lower(), word.lower())
    return word if word in COMMANDS else ""


def _interrupts_raise() -> None:
    """Ctrl-C must raise KeyboardInterrupt at the prompt even in a process started with SIGINT
    ignored (a script's `&`), which Python would otherwise inherit and keep."""
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _interactive(engine: EngineThread, session, progress: bool,
                 after_turn: Callable[[], None]) -> int:
    model = session.run_info.model.name
    print(f"{model} ready ({session.run_info.arch}, context {session.n_ctx}). "
          "Ctrl-C stops an answer; /new starts a new chat; /help lists the commands; Ctrl-D or "
          "/quit leaves.", file=sys.stderr)
    _interrupts_raise()
    new_chat = False
    history: tuple[dict[str, str], ...] = ()  # the conversation so far: each turn returns it
    typed = ""  # keys typed during the last answer: the start of the next line
    while True:
        try:
            text = typed + input("> " + typed)
        except EOFError:
            print(file=sys.stderr)
            return 0
        except KeyboardInterrupt:  # at the prompt: drop the line and ask again, as a shell does
            print(file=sys.stderr)
            typed = ""
            continue
        typed = ""
        command = command_of(text)
        if command == "/quit":
            return 0
        if command == "/new":
            new_chat, history = True, ()
            print("(new chat)", file=sys.stderr)
            continue
        if command == "/help":
            print(help_text(), file=sys.stderr)
            continue
        if command == "":
            print(f"unknown command {text.strip()}; /help lists the commands", file=sys.stderr)
            continue
        with keys_held() as held:  # keys typed meanwhile wait for the next prompt
            result = _turn(engine, session,
                           GenerateRequest(text=text, history=history, new_chat=new_chat),
                           progress)
        typed = held.text
        history = result.history
        after_turn()
        new_chat = False


def _turn(engine: EngineThread, session, request: GenerateRequest, progress: bool
          ) -> GenerateResult:
    printer = _StreamPrinter(sys.stdout, sys.stderr if progress else None)

    def stop() -> None:
        session.cancel()
        print("\n[stopping]", file=sys.stderr)

    result = engine.call(lambda: session.generate(request, on_token=printer.on_token), stop)
    printer.finish(result)
    if result.error:
        print(f"error: {result.error}", file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if result.summary is not None and result.summary.n_generated:
        print(format_perf(result.summary, session.config.n_threads, wait_policy.in_force(),
                          session.thread_choice), file=sys.stderr)
    if result.reprefill_reason:
        print(f"note: part of the conversation was re-read ({result.reprefill_reason})",
              file=sys.stderr)
    return result


class _StreamPrinter:
    """Writes reasoning and answer as they stream; a reset rewrites nothing, it notes it."""

    def __init__(self, out: TextIO, progress: TextIO | None) -> None:
        self.out = out
        self.progress = progress
        self.in_reasoning = False

    def on_token(self, event: TokenEvent) -> None:
        if event.reasoning_delta:
            if not self.in_reasoning:
                self.out.write("[thinking] ")
                self.in_reasoning = True
            self.out.write(event.reasoning_delta)
        if event.answer_delta:
            if self.in_reasoning:
                self.out.write("\n[answer] ")
                self.in_reasoning = False
            self.out.write(event.answer_delta)
        self.out.flush()
        if self.progress is not None:
            m = event.metrics
            line = {
                "step": m.step, "steps": m.steps, "wall_ms": round(m.wall_ms, 3),
                "compute_ms": round(m.compute_ms, 3), "cpu_ms": round(m.cpu_ms, 3),
                "majflt": m.majflt, "loop_overhead_ms": round(m.loop_overhead_ms, 3),
                "rss_mib": round(m.rss_mib, 1), "mem_available_mib": round(m.mem_available_mib, 1),
                "delta_reasoning": event.reasoning_delta, "delta_text": event.answer_delta,
            }
            if event.reset:
                line["reset"] = 1
            self.progress.write("PROGRESS " + json.dumps(line, ensure_ascii=False) + "\n")
            self.progress.flush()

    def finish(self, result: GenerateResult) -> None:
        if result.stopped:
            self.out.write(" [stopped]")
        self.out.write("\n")
        self.out.flush()


def format_perf(s: RunSummary, threads: int, wait: WaitChoice | None = None,
                choice: ThreadChoice | None = None) -> str:
    """The end-of-turn performance summary (upstream's one-shot text, in our words)."""
    lines = [
        f"generation: {s.n_generated} tokens, {s.s_per_token:.4f} s/token "
        f"({s.tokens_per_second:.2f} tok/s), stop: {s.stop_reason}",
        f"prefill: {s.n_prompt} tokens ({s.n_reused} reused from the cache) in "
        f"{s.prefill_seconds:.3f} s"
        + (f" ({s.prefill_tokens_per_second:.1f} tok/s)" if s.n_prompt else "")
        + f" | model load {s.load_seconds:.2f} s | TTFT {s.ttft_seconds:.3f} s",
    ]
    if s.cpu_s_per_token != UNMEASURED and s.s_per_token > 0:
        occupancy = 100 * s.cpu_s_per_token / (s.s_per_token * threads)
        lines.append(
            f"compute: {occupancy:.0f}% CPU occupancy ({s.cpu_s_per_token:.4f} cpu-s/token over "
            f"{threads} threads), {s.majflt_per_token:.2f} major faults/token"
        )
    if wait is not None or choice is not None:
        count = choice.describe() if choice is not None else f"{threads} compute"
        lines.append(f"threads: {', '.join([count, *([wait.describe()] if wait else [])])}")
    if s.moe_read_mib != UNMEASURED:
        io, mgmt = s.moe_io_s_per_token, s.moe_mgmt_s_per_token
        bandwidth = s.moe_read_mib / (io * s.n_generated) if io > 0 else 0.0
        lines.append(
            f"moe-stream: read {s.moe_read_mib:.1f} MiB ({s.moe_read_mib / s.n_generated:.2f} "
            f"MiB/token), decode {s.s_per_token:.4f} s/token (compute "
            f"{s.moe_compute_s_per_token:.4f} + cache mgmt {mgmt:.4f} + flash I/O {io:.4f} "
            f"s/token, {bandwidth:.0f} MiB/s)"
        )
        if s.cache_hit_pct != UNMEASURED:
            lines.append(
                f"moe-cache: {s.cache_hit_pct:.1f}% hit (cumulative), resident "
                f"{s.cache_resident_mib:.0f} MiB of {s.cache_budget_mib:.0f} MiB, "
                f"{s.cache_evictions} evictions, {s.cache_rereads} re-reads, token demand "
                f"{s.token_demand_mib:.1f} MiB"
            )
        if s.experts_reranked > 0:
            lines.append(
                f"moe-substitute: {s.experts_substituted} substituted of {s.experts_reranked} "
                f"slots examined ({100 * s.experts_substituted / s.experts_reranked:.1f} %): "
                "routed to a resident expert instead of a near-tie that would be read")
    if s.n_images > 0:
        if s.images_encoded > 0:
            lines.append(
                f"images: {s.n_images} in the prompt, {s.images_encoded} encoded into "
                f"{s.image_tokens} tokens in {s.image_encode_seconds:.3f} s (prefill and TTFT "
                "include it)")
        else:
            lines.append(f"images: {s.n_images} in the prompt, reused from the KV cache "
                         "(not encoded again)")
    lines.append(
        f"loop overhead: {1000 * s.loop_overhead_s_per_token:.2f} ms/token | context "
        f"{s.n_past}/{s.n_ctx}"
    )
    return "\n".join(lines)


def streaming_banner(session) -> str:
    info = session.streaming.info
    return (
        f"expert streaming on: {info.budget.explanation}; {info.lanes} I/O lanes, "
        f"{'O_DIRECT' if info.o_direct else 'buffered'} reads, dense weights {info.dense_policy}"
        + (f" ({info.dense_bytes_read / (1 << 20):.0f} MiB read into memory)"
           if info.dense_bytes_read else "")
        + (f"; {info.load_note}" if info.load_note else "")
    )
