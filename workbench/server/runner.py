"""One request's engine work: build one `GenerateRequest`, generate.

A request is a `Generation`: admitted (or refused with 429), its job queued on the engine
thread, its events (prefill progress, tokens, one final result) delivered to the request's
coroutine in order. The job builds one request value from the call (its conversation, its
settings over the model's defaults: `request_settings`) and runs one turn under the
conversation key `slots.py` picks. The session keeps no conversation or sampling state of its
own, so the window's chat goes on as if the server had not been there, with nothing to put back.
`cancel()` (a client that went away) stops the turn within one decode step.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Any

from workbench.engine.answer_format import TEXT
from workbench.engine.model_defaults import model_defaults
from workbench.engine.requests import (
    GenerateRequest,
    GenerateResult,
    PrefillProgress,
    StopReason,
    TokenEvent,
)
from workbench.engine.session import Session
from workbench.engine.turn_settings import TurnSettings
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
        # Where a streamed answer may open a tool call (the model's format): set on the engine
        # thread before Started is pushed, read on the loop after it.
        self.tool_openers: tuple[str, ...] = ()

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
        if call.calls_allowed:
            generation.tool_openers = session.tool_format.openers
        generation.push(Started())
        observer = self.observer
        info = generation.info
        if observer is not None:
            observer.request_started(info)

        def on_token(event: TokenEvent) -> None:
            generation.push(event)
            if observer is not None:
                observer.token(info, event)

        result: GenerateResult | None = None
        try:
            try:
                request = build_request(session, call)
                assert request.settings is not None
                if problems := request.settings.problems(session.config):
                    raise ValueError("; ".join(p.message for p in problems))
            except (TypeError, ValueError) as exc:
                result = GenerateResult(ok=False, stop_reason=StopReason.REJECTED,
                                        error=f"invalid sampling settings: {exc}")
                return
            if call.kind == "chat":
                request = dataclasses.replace(request, conversation=self._key(session, request))
            result = session.generate(request, on_token=on_token, on_prefill=generation.push)
        finally:
            generation.end()
            if result is None:
                result = GenerateResult(ok=False, stop_reason=StopReason.ERROR,
                                        error="the request failed on the engine")
            if observer is not None:
                observer.request_ended(info, result)
            generation.push(result)

    def _key(self, session: Session, request: GenerateRequest) -> str:
        """The conversation key whose kept state shares the longest prefix with this prompt."""
        held = {h.key: h.n_tokens for h in session.kv_pool.listing()}
        if session.kv_owner is not None:
            held[session.kv_owner] = len(session.kv_tokens)

        def measure(key: str) -> Match | None:
            if held.get(key, 0) == 0:
                return None
            forecast = session.forecast(dataclasses.replace(request, conversation=key))
            return Match(key, forecast.n_reused, held[key])

        match = self.slots.choose(measure)
        if match is not None:
            return match.key
        key = self.slots.new()
        for gone in self.slots.take_forgotten():
            if gone != session.kv_owner:  # the owner's state leaves the context on its own
                session.kv_pool.discard(gone)
        return key


def request_settings(session: Session, call: EngineCall) -> TurnSettings:
    """A call's turn settings: the open session's, with its system prompt (one typed at open,
    `serve --system-prompt`, else the model's default: the one the window starts with, so a
    request without a system message gets the same assistant), then the call's own fields. A
    system message in the call replaces that prompt: it is the first message of the
    conversation, and the chat template puts it first. The answer format is the request's own
    (`response_format`, else free text), never the window's conversation's (a server in the
    window shares its session)."""
    system_prompt = (session.config.system_prompt
                     or model_defaults(session.config.model).system_prompt)
    if call.kind != "chat" or any(m.get("role") == "system" for m in call.messages):
        system_prompt = ""
    return TurnSettings.of(session.config).replace(
        system_prompt=system_prompt, answer_format=TEXT, answer_schema="", **call.settings)


def build_request(session: Session, call: EngineCall) -> GenerateRequest:
    """The one request a call makes (raw completions share one conversation key)."""
    return GenerateRequest(
        text=call.text, history=tuple(call.history) if call.kind == "chat" else (),
        settings=request_settings(session, call), n_predict=call.max_tokens, think=call.think,
        conversation=RAW_KEY if call.kind == "completion" else None, stop=call.stop,
        raw=call.kind == "completion",
        decoding=call.decoding if call.decoding.active else None, tools=call.tools,
        message=call.last_message)
