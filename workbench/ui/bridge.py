"""The one engine thread, seen from the UI's asyncio loop.

Every llama.cpp object (model, context, sampler) is created, used and freed on the single
"engine" thread this class starts (an EngineThread, the one the CLI and the benches use too;
the session itself refuses calls from any other thread); the UI only awaits. Events cross
threads one way, through an EventPipe (`loop.call_soon_threadsafe`, one wake-up per batch);
nothing else is shared except the thread-safe `Session.cancel()`. Qt-free on purpose: the same
bridge drives the window, the screenshot command and the UI benchmark, and its tests need no
display.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from workbench.config import Config
from workbench.engine.engine_thread import EngineThread
from workbench.engine.kv_pool import HeldState
from workbench.engine.kv_spill import remove_states
from workbench.engine.opening import settle_threads
from workbench.engine.requests import (
    Forecast,
    GenerateRequest,
    GenerateResult,
    PrefillProgress,
    SessionError,
    TokenEvent,
)
from workbench.engine.route_recorder import WINDOW_MAX_LOADS
from workbench.engine.session import Session, check_openable
from workbench.engine.sinks import Sink
from workbench.engine.thread_choice import ThreadChoice
from workbench.engine.turn_settings import TurnSettings
from workbench.engine.warm_start import warm_start_dir
from workbench.moe.route_trace import RouteTrace
from workbench.ui.event_pipe import EventPipe
from workbench.ui.ui_pacer import LIVE_FRAME_MAX_S, shared_pacer

T = TypeVar("T")
# Tokens reach the UI in batches at most this far apart (the chat shows text ten times a
# second at most), stretched by the pacer up to the maximum while the engine needs every core;
# a stop or the answer's end is seen at most that late. The maximum is half the plots' longest
# frame interval: a frame draws only tokens that have arrived, so with batches 0.25 s apart
# the plots could not refresh more often than that (issue 39: 5 Hz). A batch costs one
# event-loop step; the tokens' own work is the same however they are batched.
EVENT_POLL_S = 0.06
MAX_EVENT_POLL_S = LIVE_FRAME_MAX_S / 2
# The engine thread, and the compute threads llama.cpp starts from it (they inherit it), run
# at a lower priority than the UI: when they compete for a core, the UI gets it promptly.
ENGINE_NICE = 5
EngineEvent = PrefillProgress | TokenEvent | GenerateResult


class LoadCancelled(Exception):
    """The user cancelled loading a model; nothing is loaded."""


class ModelKept(SessionError):
    """The new model did not open, and the one that was open is open still: untouched when the
    new one was refused before loading (`reloaded` False), else opened again with its own
    settings. `model` describes it; the message is the new model's failure."""

    def __init__(self, message: str, model: LoadedModel, reloaded: bool) -> None:
        super().__init__(message)
        self.model, self.reloaded = model, reloaded


class EngineBusy(RuntimeError):
    """A generation is already running (the UI disables Send meanwhile; this is the backstop)."""


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """What the UI needs to know about the open session, copied off the engine thread."""

    config: Config
    name: str
    path: str
    arch: str
    n_ctx: int
    chat_mode: bool
    think_control: str
    template_origin: str
    load_seconds: float
    run_info: Any  # RunInfo (a plain dataclass, safe to read from any thread once built)
    is_moe: bool
    # What the user should know about these settings (the expert cache cliff), as the CLI says.
    warnings: tuple[str, ...] = ()
    reasons: bool = True  # the chat template marks reasoning (else there is no thinking)
    sees_images: bool = False  # an image projector is loaded
    thread_choice: ThreadChoice | None = None  # how the thread count was decided at open

    @property
    def o_direct(self) -> bool:
        """Whether the session streams its experts with O_DIRECT reads: as resolved at load
        (a file system that refuses O_DIRECT gets buffered reads); False without streaming."""
        settings = getattr(self.run_info, "settings", None) or {}
        return bool(self.is_moe and self.config.moe_stream and settings.get("o_direct"))


class EngineBridge:
    """`await open(cfg)`, `async for ev in generate(req)`, `cancel()`, `await close()`."""

    def __init__(self, sink: Sink | None = None, kv_dir: Path | None = None) -> None:
        self._sink = sink
        self._kv_dir = kv_dir  # conversations' KV states kept across restarts (None: none)
        self._session: Session | None = None  # touched only on the engine thread...
        self._live: Session | None = None  # ...except this reference, used for cancel()
        self._cancel_load = threading.Event()
        self._generating = False
        # cancel() reaches the session only while the engine thread runs a generation: a Stop
        # that lands after it ended would otherwise stay set and stop the next answer.
        self._engine_lock = threading.Lock()
        self._engine_busy = False
        self._closed = False
        # Started last: its on_exit closes what is still open, on the engine thread.
        self._engine = EngineThread("engine", on_start=lambda: lower_thread_priority(ENGINE_NICE),
                                    on_exit=self._close_session)

    # ---- lifecycle ----------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._live is not None

    @property
    def generating(self) -> bool:
        return self._generating

    async def open(
        self, config: Config, on_progress: Callable[[float], None] | None = None,
        measure_threads: bool = False,
    ) -> LoadedModel:
        """Close any open model, then load `config`'s. Raises SessionError or LoadCancelled.
        `measure_threads`: its thread count is measured once loaded (engine/opening.py).

        A failure never leaves the window without the model it had: a config or file refused
        before loading does not touch it, and after a failed load it is opened again (raised
        as ModelKept, a SessionError). A cancelled load leaves none.

        `on_progress(fraction)` runs on the UI loop, at most once per percent.
        """
        loop = asyncio.get_running_loop()
        self._cancel_load.clear()
        last = [-1]

        def progress(fraction: float) -> bool:
            pct = int(fraction * 100)
            if on_progress is not None and pct != last[0]:
                last[0] = pct
                loop.call_soon_threadsafe(on_progress, fraction)
            return not self._cancel_load.is_set()  # False makes llama.cpp abandon the load

        def open_session(cfg: Config) -> Session:
            # Routing is recorded (bounded) for the cache-sizing view and route traces.
            return Session.open(cfg, sink=self._sink, progress=progress, kv_dir=self._kv_dir,
                                record_routes=True, max_route_loads=WINDOW_MAX_LOADS,
                                warm_dir=warm_start_dir())

        def job() -> LoadedModel:
            previous = self._session
            if previous is not None:
                # What is refused before loading leaves the open model as it is.
                try:
                    check_openable(config)
                except SessionError as exc:
                    raise ModelKept(str(exc), _describe(previous), reloaded=False) from None
            before = previous.config if previous is not None else None
            self._close_session()
            try:
                session = open_session(config)
            except SessionError as exc:
                if self._cancel_load.is_set():
                    raise LoadCancelled("loading was cancelled; no model is loaded") from None
                if before is None:
                    raise
                # The model that worked comes back (both at once might not fit in memory).
                try:
                    again = open_session(before)
                except SessionError:
                    raise exc from None
                self._session = self._live = again
                raise ModelKept(str(exc), _describe(again), reloaded=True) from None
            if self._cancel_load.is_set():  # cancelled after the last progress call
                session.close()
                raise LoadCancelled("loading was cancelled; no model is loaded")
            self._session = self._live = session
            settle_threads(session, measure=measure_threads)  # the engine thread's, as decode
            return _describe(session)

        return await self._call(job)

    def cancel_open(self) -> None:
        """Abandon a load in progress (llama.cpp checks at its next progress report)."""
        self._cancel_load.set()

    async def close(self) -> None:
        """Free the model on the engine thread and stop the thread. Idempotent."""
        if self._closed:
            return
        self.cancel()
        self._cancel_load.set()
        await self._call(self._close_session)
        self._closed = True
        self._engine.stop()
        await asyncio.get_running_loop().run_in_executor(None, self._engine.join)

    def _close_session(self) -> None:
        if self._session is not None:
            self._live = None
            self._session.close()
            self._session = None

    # ---- conversation state ---------------------------------------------------------------------

    async def forecast(self, request: GenerateRequest) -> Forecast | None:
        """What sending `request` would cost to read (None while an answer runs or none is
        loaded: the engine thread is not kept from its work for an estimate)."""
        if self._generating or self._session is None:
            return None
        return await self._call(lambda: self._require().forecast(request))

    async def kv_states(self) -> list[HeldState]:
        """The conversations whose KV state the open session keeps, most recent first."""
        if self._session is None:
            return []
        return await self._call(lambda: self._require().kv_pool.listing())

    async def forget_conversation(self, conversation: str) -> None:
        """A conversation was deleted: drop its kept KV state, in memory and on disk (files of
        every model and setting, also with no model open). Off the UI thread."""
        if self._session is not None:
            await self._call(lambda: self._require().forget_conversation(conversation))
        if self._kv_dir is not None:
            kv_dir = self._kv_dir
            await asyncio.get_running_loop().run_in_executor(
                None, remove_states, kv_dir, conversation)

    async def reset_conversation(self) -> None:
        await self._call(lambda: self._require().reset_conversation())

    async def apply_settings(self, config: Config) -> LoadedModel:
        """Settings that need no reopen; raises SessionError if a load-time one changed.

        The session adopts the session-wide ones (the conversation memory's budgets); a turn's
        own settings travel in each request (`TurnSettings.of(model.config)`). Returns the open
        model with `config` in force: its run info carries the turn settings, so the next run is
        recorded with what it actually ran with.
        """

        def job() -> LoadedModel:
            session = self._require()
            session.set_session_settings(config)
            return replace(_describe(session), config=config.replace(model=session.config.model),
                           run_info=session.run_info_for(TurnSettings.of(config)))

        return await self._call(job)

    async def kv_tokens(self) -> int:
        """KV cells the context uses now (for the context gauge): its tokens, and one cell per
        embedding of an M-RoPE image, more than the positions it takes."""
        return await self._call(lambda: self._require().kv_cells)

    # ---- generation -----------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the generation the engine is running, prefill included. Safe from any thread,
        never blocks. A stop meant for an answer the engine has not started yet is the
        `stop` event given to `generate`."""
        with self._engine_lock:
            live = self._live if self._engine_busy else None
            if live is not None:
                live.cancel()

    async def generate(self, request: GenerateRequest, stop: threading.Event | None = None
                       ) -> AsyncIterator[EngineEvent]:
        """PrefillProgress and TokenEvent as they happen, then exactly one GenerateResult.

        `stop`, when set before the engine starts this generation, stops it before its first
        decode (a Stop pressed as the answer starts); later, `cancel()` does. Leaving the loop
        early cancels the generation and waits for the engine to confirm.
        """
        if self._generating:
            raise EngineBusy("a generation is already running")
        loop = asyncio.get_running_loop()
        events: EventPipe[EngineEvent | BaseException] = EventPipe(
            loop, poll_s=lambda: shared_pacer().interval(EVENT_POLL_S, MAX_EVENT_POLL_S))
        put = events.push
        self._generating = True

        def job() -> None:
            try:
                session = self._require()
                with self._engine_lock:
                    self._engine_busy = True
                    if stop is not None and stop.is_set():
                        session.cancel()  # spent by this generation, before its first decode
                try:
                    result = session.generate(request, on_token=put, on_prefill=put)
                finally:
                    with self._engine_lock:
                        self._engine_busy = False
                put(result)
            except BaseException as exc:  # surfaced to the awaiting coroutine, not swallowed
                put(exc)

        self._engine.submit(job)
        ended = False  # the engine's last word (result or exception) has been received
        try:
            while not ended:
                batch = await events.get_batch()
                ended = any(isinstance(i, GenerateResult | BaseException) for i in batch)
                for item in batch:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
        finally:
            if not ended:
                self.cancel()
                while not any(isinstance(item, GenerateResult | BaseException)
                              for item in await events.get_batch()):
                    pass
            self._generating = False

    # ---- the engine thread --------------------------------------------------------------------

    async def route_trace(self, conversation: str | None, last_turn: bool = False
                          ) -> RouteTrace | None:
        """The routing recorded for a conversation (or its last turn only), with the trace's
        preamble; None when the session does not stream its experts."""

        def job() -> RouteTrace | None:
            session = self._session
            runtime = session.streaming if session is not None else None
            if runtime is None or runtime.routes is None:
                return None
            turns = runtime.routes.turns_of(conversation)
            return runtime.route_trace(turns[-1:] if last_turn else turns)

        return await self._call(job)

    async def run_on_session(self, job: Callable[[Session], T]) -> T:
        """`job(session)` on the engine thread, queued behind the window's own work, from any
        asyncio loop (the server's requests when the window serves its model:
        ui/qt_server_switch.py). SessionError when no model is loaded."""
        return await self._call(lambda: job(self._require()))

    def _require(self) -> Session:
        if self._session is None:
            raise SessionError("no model is loaded: open one first")
        return self._session

    async def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the engine thread; its result or exception comes back here."""
        if self._closed:
            raise SessionError("the engine has been shut down")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:
            if future.done():
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        def job() -> None:
            try:
                value = fn()
            except BaseException as exc:
                loop.call_soon_threadsafe(settle, False, exc)
            else:
                loop.call_soon_threadsafe(settle, True, value)

        self._engine.submit(job)
        # The engine finishes the job even if the awaiting coroutine is cancelled.
        return await asyncio.shield(future)

    @property
    def engine_thread_id(self) -> int | None:
        """`threading.get_ident()` of the engine thread (tests check the session's is this)."""
        return self._engine.ident


def lower_thread_priority(steps: int) -> bool:
    """Raise the calling thread's nice value by `steps` (Linux, where nice is per thread);
    False where that is not possible, and the thread runs on at its priority."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + steps)
    except OSError:
        return False
    return True


def _describe(session: Session) -> LoadedModel:
    info = session.run_info
    return LoadedModel(
        config=session.config,
        name=info.model.name,
        path=info.model.path,
        arch=info.arch,
        n_ctx=session.n_ctx,
        chat_mode=session.chat_mode,
        think_control=str(session.think_control),
        template_origin=session.template_origin,
        load_seconds=session.load_seconds,
        run_info=info,
        is_moe=session.facts.is_moe,
        warnings=tuple(session.warnings),
        sees_images=session.sees_images,
        reasons=session.reasons,
        thread_choice=session.thread_choice,
    )
