"""The benches' engine thread: every bench session is opened, used and closed on it.

One per process, like `chat`'s (engine/engine_thread.py), so a bench measures the arrangement
users run: one OpenMP pool for every decode. The matrix's worker processes each have theirs.
A Ctrl-C during a call is raised once the call has returned (a turn, a load), so nothing is
freed under a running decode and the `finally` blocks close what is open.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from workbench.config import Config
from workbench.engine.engine_thread import EngineThread
from workbench.engine.session import Session

T = TypeVar("T")


@functools.cache
def engine() -> EngineThread:
    """The process's engine thread for bench sessions (a daemon thread, ends with the process)."""
    return EngineThread("engine")


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
