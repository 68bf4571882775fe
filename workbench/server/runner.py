"""One request's engine work: the session set up for it, the generation, the session put back.

A request is a `Generation`: admitted (or refused with 429), its job queued on the engine
thread, its events (prefill progress, tokens, one final result) delivered to the request's
coroutine in order. The job gives the session the request's sampling settings and
conversation, runs one turn under the conversation key `slots.py` picks, and restores the
session's own settings and history afterwards: the window's chat goes on as if the server had
not been there. `cancel()` (a client that went away) stops the turn within one decode step.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any

from workbench.engine.requests import (
    GenerateRequest,
    GenerateResult,
    PrefillProgress,
    SessionError,
    StopReason,
    TokenEvent,
)
from workbench.engine.session import Session
from workbench.server.admission import Admission
from workbench.server.engine_host import EngineHost
from workbench.server.protocol import EngineCall
from workbench.server.slots import PREFIX, Match, Slots
from workbench.server.telemetry import RequestInfo, ServerObserver

RAW_KEY = f"{PREFIX}completions"  # raw completions reuse the prefix of the previous one
Event = PrefillProgress | TokenEvent | GenerateResult


@dataclass(frozen=True, slots=True)
class Started:
    """The engine took the request (it waited its turn until now)."""


class Generation:
    """One admitted request's events, and the way to stop it from the server's loop."""

    def __init__(self, info: RequestInfo, loop: asyncio.AbstractEventLoop) -> None:
        self.info = info
        self._loop = loop
        self.events: asyncio.Queue[Event | Started | BaseException] = asyncio.Queue()
        self.finished = False  # the final result (or an exception) has been received
        self._lock = threading.Lock()
        self._cancelled = False
        self._live: Session | None = None  # the session, while this request's turn runs

    def push(self, item: Event | Started | BaseException) -> None:
        """From the engine thread. The server's loop outlives every admitted request (its
        lifespan drains them); should it be gone all the same, the event is dropped rather
        than raised into the engine thread, which would end it."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self.events.put_nowait, item)

    async def next(self) -> Event | Started:
        item = await self.events.get()
        if isinstance(item, BaseException):
            self.finished = True
            raise item
        if isinstance(item, GenerateResult):
            self.finished = True
        return item

    def cancel(self) -> None:
        """Stop this request's turn (the next decode step does not run), or skip it if it has
        not started. Safe from any thread; a cancel after the turn ended touches nothing."""
        with self._lock:
            self._cancelled = True
            if self._live is not None:
                self._live.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def begin(self, session: Session) -> bool:
        """Engine thread: the turn starts (False: it was cancelled while it waited)."""
        with self._lock:
            if self._cancelled:
                return False
            self._live = session
            return True

    def end(self) -> None:
        with self._lock:
            self._live = None


class Runner:
    """Runs calls on an engine host, one at a time, in the order they were admitted."""

    def __init__(self, host: EngineHost, *, max_waiting: int = 8,
                 observer: ServerObserver | None = None) -> None:
        self.host = host
        self.admission = Admission(max_waiting)
        self.observer = observer
        self.slots = Slots()  # touched on the engine thread only
        self.completed = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._generations: set[Generation] = set()  # admitted, engine work not finished

    def start(self, call: EngineCall, info: RequestInfo) -> Generation:
        """Admit `call` (ApiError 429 when the queue is full) and queue its engine job."""
        self.admission.admit()
        loop = asyncio.get_running_loop()
        generation = Generation(info, loop)
        started = time.perf_counter()
        task = loop.create_task(self.host.run(lambda session: self._job(session, call,
                                                                        generation)))
        self._tasks.add(task)
        self._generations.add(generation)

        def done(t: asyncio.Task[Any]) -> None:
            # The place in the queue is free only when the engine is: not when the client left.
            self._tasks.discard(t)
            self._generations.discard(generation)
            self.admission.release(time.perf_counter() - started)
            self.completed += 1
            if t.cancelled():
                generation.push(RuntimeError("the engine job was cancelled"))
            elif t.exception() is not None:
                generation.push(t.exception())

        task.add_done_callback(done)
        return generation

    def cancel_all(self) -> None:
        """Stop every admitted request (running or waiting). Safe from any thread."""
        for generation in list(self._generations):
            generation.cancel()

    async def drain(self) -> None:
        """Wait until every admitted request's engine work has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ---- the engine thread ----------------------------------------------------------------------

    def _job(self, session: Session, call: EngineCall, generation: Generation) -> None:
        if not generation.begin(session):
            generation.push(GenerateResult(ok=True, stop_reason=StopReason.STOPPED))
            return
        generation.push(Started())
        observer = self.observer
        info = generation.info
        if observer is not None:
            observer.request_started(info)

        def on_token(event: TokenEvent) -> None:
            generation.push(event)
            if observer is not None:
                observer.token(info, event)

        saved_config, saved_history = session.config, [dict(m) for m in session.history]
        result: GenerateResult | None = None
        try:
            try:
                wanted = saved_config.replace(system_prompt="", **call.settings)
                if wanted != session.config:
                    session.apply_request_settings(wanted)
            except (SessionError, TypeError, ValueError) as exc:
                result = GenerateResult(ok=False, stop_reason=StopReason.REJECTED,
                                        error=f"invalid sampling settings: {exc}")
                return
            if call.kind == "chat":
                session.set_history(call.history)
                key = self._key(session, call)
            else:
                key = RAW_KEY
            request = GenerateRequest(text=call.text, n_predict=call.max_tokens,
                                      think=call.think, conversation=key, stop=call.stop,
                                      raw=call.kind == "completion")
            result = session.generate(request, on_token=on_token, on_prefill=generation.push,
                                      decoding=call.decoding if call.decoding.active else None)
        finally:
            generation.end()
            try:
                if session.config != saved_config:
                    session.apply_request_settings(saved_config)
                session.set_history(saved_history)
            finally:
                if result is None:
                    result = GenerateResult(ok=False, stop_reason=StopReason.ERROR,
                                            error="the request failed on the engine")
                if observer is not None:
                    observer.request_ended(info, result)
                generation.push(result)

    def _key(self, session: Session, call: EngineCall) -> str:
        """The conversation key whose kept state shares the longest prefix with this prompt."""
        held = {h.key: h.n_tokens for h in session.kv_pool.listing()}
        if session.kv_owner is not None:
            held[session.kv_owner] = len(session.kv_tokens)

        def measure(key: str) -> Match | None:
            if held.get(key, 0) == 0:
                return None
            forecast = session.forecast(call.history, call.text, key)
            return Match(key, forecast.n_reused, held[key])

        match = self.slots.choose(measure)
        if match is not None:
            return match.key
        key = self.slots.new()
        for gone in self.slots.take_forgotten():
            if gone != session.kv_owner:  # the owner's state leaves the context on its own
                session.kv_pool.discard(gone)
        return key
