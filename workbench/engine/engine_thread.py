"""The one engine thread: every llama.cpp call of a session (open, turns, resize, close) runs on it.

Why one thread: llama.cpp's CPU backend runs each graph through an OpenMP team that belongs to
the thread that calls it. A session opened on one thread (context creation and, when experts
stream, the capture decode) and used on another has two teams; at each graph split streaming
makes per token they fight for the cores (issue 14 measured 34k context switches per 128 tokens
against upstream's 722, and 0.70x its tok/s at a 98 % cache hit rate; one thread: 0.98-1.00x).

`EngineThread` is that thread, Qt-free, for every entry point: the CLI waits on it (so Ctrl-C
reaches the main thread at once and becomes a cancel request), the benches measure through it,
the UI bridge submits its jobs to it. `ThreadOwner` is the guard a session keeps: it records the
thread that opened it, and any other thread that calls into it gets a `WrongThreadError`.
"""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class WrongThreadError(RuntimeError):
    """A programming error: a session was called from a thread other than the one that opened
    it. Not a user error (never caught as a SessionError): the fix is in the calling code."""


class ThreadOwner:
    """The thread an object's llama.cpp calls belong to, and the check that keeps them there.

    One `threading.get_ident()` comparison per check: cheap enough for every session call (the
    per-token loop does not check; generate() checks once per turn)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.ident = threading.get_ident()
        self.name = threading.current_thread().name

    def check(self, call: str) -> None:
        if threading.get_ident() != self.ident:
            here = threading.current_thread()
            raise WrongThreadError(
                f"{self.what}.{call}() was called on thread {here.name!r} ({here.ident}), but "
                f"the {self.what} was opened on thread {self.name!r} ({self.ident}). Every "
                f"llama.cpp call of a {self.what} must run on the thread that opened it (two "
                "OpenMP thread pools fight over the cores otherwise): submit the call to that "
                "thread (workbench.engine.engine_thread.EngineThread). Only cancel() may be "
                "called from anywhere."
            )

    def take(self) -> None:
        """Make the calling thread the owner. Only for measuring the split arrangement on
        purpose (bench stream's threads arm); real entry points never move a session."""
        self.ident = threading.get_ident()
        self.name = threading.current_thread().name


class EngineThread:
    """A thread that runs submitted jobs one after another, in order, until stopped.

    `on_start` runs first on the thread (e.g. lowering its priority), `on_exit` last (e.g.
    closing what is still open), both on the engine thread itself."""

    def __init__(self, name: str = "engine", *, on_start: Callable[[], object] | None = None,
                 on_exit: Callable[[], object] | None = None) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._on_start = on_start
        self._on_exit = on_exit
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def ident(self) -> int | None:
        return self._thread.ident

    @property
    def name(self) -> str:
        return self._thread.name

    def _run(self) -> None:
        # Ctrl-C is the main thread's: a SIGINT the kernel hands to this thread (or to the
        # compute and I/O threads llama.cpp and the streamer start from it, which inherit the
        # mask) only sets Python's flag, without waking the main thread's read at the prompt
        # (the suspected cause of a terminal chat that once sat on "^C" under load). Blocked
        # here, the signal always goes to the main thread.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        if self._on_start is not None:
            self._on_start()
        try:
            while (job := self._jobs.get()) is not None:
                job()
        finally:
            if self._on_exit is not None:
                self._on_exit()

    def submit(self, job: Callable[[], None]) -> None:
        """Queue `job`; it must catch what it raises (an escaping exception ends the thread)."""
        self._jobs.put(job)

    def call(self, fn: Callable[[], T], on_interrupt: Callable[[], None] | None = None) -> T:
        """`fn()` on the engine thread, its result or exception here. Each Ctrl-C meanwhile calls
        `on_interrupt` (which should make `fn` end soon) and the wait goes on, so nothing is
        freed under a running call; without `on_interrupt` the KeyboardInterrupt is raised once
        `fn` has returned."""
        if threading.get_ident() == self._thread.ident:
            return fn()  # already on the engine thread: queueing would wait for itself
        box: dict[str, Any] = {}
        done = threading.Event()
        interrupted = False

        def job() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # re-raised on the caller's thread
                box["error"] = exc
            finally:
                done.set()

        self._jobs.put(job)
        # Wait on an Event, not Thread.join: a KeyboardInterrupt inside join() can mark a thread
        # that is still running as finished (CPython 3.11), and the model would then be freed
        # under a live decode.
        while not done.is_set():
            try:
                done.wait(0.1)
            except KeyboardInterrupt:
                if on_interrupt is None:
                    interrupted = True
                else:
                    on_interrupt()
        if "error" in box:
            raise box["error"]
        if interrupted:
            raise KeyboardInterrupt
        return box["value"]

    def stop(self) -> None:
        """Let the queued jobs finish, then `on_exit`, then the thread ends."""
        self._jobs.put(None)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> EngineThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.join()
