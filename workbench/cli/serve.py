"""`workbench serve`: the model on an OpenAI-compatible HTTP API (workbench/server/).

Binds 127.0.0.1 unless --host says otherwise (with a warning that says what that exposes).
Ctrl-C stops taking new requests, lets those admitted finish (drain), closes the model and
exits 0; a second Ctrl-C stops at once. The SIGINT handler is set explicitly: a process started
with SIGINT ignored (a shell's `&`) would otherwise never hear Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING

from workbench.config_cli import add_arguments, typed_settings
from workbench.engine.opening import Opening, decide

if TYPE_CHECKING:
    from workbench.engine.metrics import RunInfo
    from workbench.engine.requests import GenerateResult, TokenEvent
    from workbench.server.telemetry import RequestInfo

DEFAULT_PORT = 8080


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    from workbench.server.app import MAX_BODY_BYTES

    p = sub.add_parser("serve", help="serve the model on an OpenAI-compatible API (localhost)")
    add_arguments(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--api-key", default=os.environ.get("WORKBENCH_API_KEY") or None,
                   help="require 'Authorization: Bearer KEY' on every request (default: "
                        "$WORKBENCH_API_KEY, else none)")
    p.add_argument("--queue", type=int, default=8, metavar="N",
                   help="requests that may wait while one runs; past that: 429 (default 8)")
    p.add_argument("--max-request-bytes", type=int, default=MAX_BODY_BYTES, metavar="N",
                   help=f"largest request body accepted (default {MAX_BODY_BYTES})")
    p.add_argument("--csv", metavar="FILE",
                   help="write every request's per-token metrics to FILE (appears, whole, when "
                        "the server stops)")
    p.add_argument("--quiet", action="store_true", help="no line per request on stderr")
    p.set_defaults(run=run_serve)


def exposure_warning(host: str, port: int, api_key: str | None) -> str | None:
    """What binding `host` exposes, when it is more than this machine."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        return None
    who = ("every machine that can reach this one" if host in ("0.0.0.0", "::")
           else f"every machine that can reach {host}")
    key = ("they need the API key" if api_key
           else "with no API key anyone there can use it: pass --api-key")
    return (f"--host {host} exposes the model on port {port} to {who} (and it reads the "
            f"prompts they send); {key}")


def run_serve(args: argparse.Namespace) -> int:
    # Explicit: inherited SIG_IGN (started with `&`) would make Ctrl-C and `kill -INT` no-ops.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.queue < 0 or args.max_request_bytes < 1 or not 0 <= args.port < 65536:
        print("error: --queue must be 0 or more, --max-request-bytes positive, --port "
              "0-65535", file=sys.stderr)
        return 2
    opening = serve_opening(args)
    # The port is taken first: one in use (or an address not of this machine) is said at once,
    # before a model loads and before any "serving ... on" line could be printed.
    try:
        sock = listening_socket(args.host, args.port)
    except OSError as exc:
        print(f"error: cannot listen on {args.host} port {args.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    with sock:
        return _load_and_serve(args, opening, sock)


def serve_opening(args: argparse.Namespace) -> Opening:
    """What `serve` opens with (engine/opening.py), as `chat` does: the model's defaults (the
    bundled model's repetition penalty...), then the flags typed. A request's own fields
    override them for that request only (server/runner.py)."""
    return decide(getattr(args, "model", ""), typed=typed_settings(args))


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port), ready for uvicorn (`Server.run(sockets=...)`); OSError
    (EADDRINUSE: the port is in use) when it cannot be had."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _load_and_serve(args: argparse.Namespace, opening: Opening, sock: socket.socket) -> int:
    from workbench.atomic_write import OutputFileError
    from workbench.engine.requests import SessionError
    from workbench.engine.sinks import CsvMetricsSink
    from workbench.server.engine_host import OwnEngine

    warning = exposure_warning(args.host, args.port, args.api_key)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    try:
        csv = CsvMetricsSink(args.csv) if args.csv else None
    except OutputFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    engine = OwnEngine()
    cancel_load = threading.Event()
    try:
        try:
            session = engine.open(opening.config, sink=csv,
                                  progress=lambda _f: not cancel_load.is_set(),
                                  on_interrupt=cancel_load.set,
                                  measure_threads=opening.measures_threads)
        except SessionError as exc:
            print("loading was cancelled" if cancel_load.is_set() else f"error: {exc}",
                  file=sys.stderr)
            if csv is not None:
                csv.discard()
            return 130 if cancel_load.is_set() else 1
        for note in session.warnings:
            print(f"warning: {note}", file=sys.stderr)
        if session.thread_choice is not None:
            print(f"threads: {session.thread_choice.describe()}", file=sys.stderr)
        code = _serve(args, engine.run_info, engine, sock)
    finally:
        engine.close()
    if csv is not None:
        try:
            csv.close()
        except OutputFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return code or 1
    return code


def _serve(args: argparse.Namespace, info: RunInfo, engine, sock: socket.socket) -> int:
    import uvicorn

    from workbench.server.app import create_app
    from workbench.server.engine_host import model_id as model_id_of
    from workbench.server.runner import Runner

    model_id = model_id_of(info)
    runner = Runner(engine, max_waiting=args.queue,
                    observer=None if args.quiet else LogObserver())
    app = create_app(runner, model_id, api_key=args.api_key,
                     max_body_bytes=args.max_request_bytes)
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port,
                                           log_level="warning", lifespan="on",
                                           access_log=False))
    host = f"[{args.host}]" if ":" in args.host else args.host
    port = sock.getsockname()[1]  # --port 0: the one the system chose
    print(f"serving {model_id} on http://{host}:{port}/v1 (OpenAI API"
          f"{', API key required' if args.api_key else ''}); Ctrl-C stops", file=sys.stderr,
          flush=True)
    # uvicorn sets its own SIGINT/SIGTERM handlers (signal.signal, so an inherited SIG_IGN is
    # replaced): the first stops accepting and drains, a second one exits at once. Once it has
    # stopped it raises the signal again under the handler set above: that is the stop we
    # asked for, not an error.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    print(f"stopped: {runner.completed} requests served, {runner.admission.refused} refused "
          "(queue full)", file=sys.stderr)
    return 0 if server.started else 1


class LogObserver:
    """One line per request on stderr: who, how much, how fast, what was reused."""

    def request_started(self, request: RequestInfo) -> None:
        pass

    def token(self, request: RequestInfo, event: TokenEvent) -> None:
        pass

    def request_ended(self, request: RequestInfo, result: GenerateResult) -> None:
        s = result.summary
        if s is None:
            line = f"{result.stop_reason}" + (f": {result.error}" if result.error else "")
        else:
            line = (f"{s.n_generated} tokens at {s.tokens_per_second:.1f} tok/s, prompt "
                    f"{s.n_prompt + s.n_reused} ({s.n_reused} cached), stop {s.stop_reason}")
        print(f"[{request.kind}] {request.client}: {line}", file=sys.stderr, flush=True)
