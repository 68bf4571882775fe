"""The benches' engine thread: every bench session is opened, used and closed on it.

One per process, like `chat`'s (engine/engine_thread.py), so a bench measures the arrangement
users run: one OpenMP pool for every decode. The matrix's worker processes each have theirs.
A Ctrl-C during a call is raised once the call has returned (a turn, a load), so nothing is
freed under a running decode and the `finally` blocks close what is open.

Inside another program's process (the window's Price it and bench matrix) bench work runs in
`engine_that_ends()`: on a thread of its own that ends with the work. libgomp keeps a team of
threads for every thread that ran a graph, for as long as that thread lives, and while the teams
hold more threads than there are cores it all but stops spinning between graph splits. On 2
cores one pricing on the lasting bench thread left every later decode of the window's engine 56 %
slower (21.6 -> 33.8 ms per token, gemma-3-270m, 2 threads) until the window closed; with the
pricing's thread ended, 21.5 ms: a team whose thread has ended is freed.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from workbench.config import Config
from workbench.engine.engine_thread import EngineThread
from workbench.engine.session import Session

T = TypeVar("T")


_borrowed: list[EngineThread] = []  # engine_that_ends() blocks in progress: the first one's
_borrowed_lock = threading.Lock()


def engine() -> EngineThread:
    """The engine thread for bench sessions: inside `engine_that_ends()`, the block's; else the
    process's own (a daemon thread, ends with the process)."""
    with _borrowed_lock:
        if _borrowed:
            return _borrowed[0]
    return _process_engine()


@functools.cache
def _process_engine() -> EngineThread:
    return EngineThread("engine")


@contextmanager
def engine_that_ends(name: str = "bench-engine") -> Iterator[EngineThread]:
    """Bench work in this block runs on an engine thread that ends when the block does (the
    module docstring says why). Sessions opened inside must be closed inside. Blocks that
    overlap (a pricing beside a matrix) share the first one's thread, which ends with the last
    of them."""
    with _borrowed_lock:
        _borrowed.append(_borrowed[0] if _borrowed else EngineThread(name))
        thread = _borrowed[0]
    try:
        yield thread
    finally:
        with _borrowed_lock:
            _borrowed.pop()
            last = not _borrowed
        if last:
            thread.stop()
            thread.join()


def on_engine(fn: Callable[[], T]) -> T:
    """`fn()` on the engine thread; its result or exception here."""
    return engine().call(fn)


def open_session(config: Config, **options: object) -> Session:
    """`Session.open(config, **options)` on the engine thread (the session's thread from now)."""
    return on_engine(lambda: Session.open(config, **options))


def close_session(session: Session) -> None:
    on_engine(session.close)


@contextmanager
def opened(config: Config, **options: object) -> Iterator[Session]:
    """A session opened on the engine thread, closed there on leaving the block."""
    session = open_session(config, **options)
    try:
        yield session
    finally:
        close_session(session)
