"""Where the server's engine work runs: on the one engine thread, with the session open there.

`EngineHost` is what the server needs: `run(job)` runs `job(session)` on the engine thread and
returns its result to the awaiting coroutine (whatever loop it runs on). `OwnEngine` is the
CLI's: it opens its own session on its own EngineThread. The window passes its bridge's
(ui/qt_server_switch.py), so the server answers with the model the window has loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from workbench.config import Config
from workbench.engine.engine_thread import EngineThread
from workbench.engine.metrics import RunInfo
from workbench.engine.opening import settle_threads
from workbench.engine.session import Session
from workbench.engine.sinks import Sink

T = TypeVar("T")


def model_id(info: RunInfo) -> str:
    """The model's id on the API: its file name without `.gguf`."""
    name = info.model.name
    return name[:-5] if name.lower().endswith(".gguf") else name


class EngineHost(Protocol):
    async def run(self, job: Callable[[Session], T]) -> T: ...


class OwnEngine:
    """A session of the server's own, opened, used and closed on one EngineThread."""

    def __init__(self) -> None:
        self._thread = EngineThread("engine")
        self._session: Session | None = None

    def open(self, config: Config, *, sink: Sink | None = None, kv_dir: Path | None = None,
             progress: Callable[[float], bool] | None = None,
             on_interrupt: Callable[[], None] | None = None,
             measure_threads: bool = False) -> Session:
        """Blocking: load the model on the engine thread (SessionError when it cannot), and
        settle its thread count there (engine/opening.py: `measure_threads` measures it)."""
        def load() -> Session:
            session = Session.open(config, sink=sink, kv_dir=kv_dir, progress=progress)
            settle_threads(session, measure=measure_threads)
            return session

        self._session = self._thread.call(load, on_interrupt)
        return self._session

    @property
    def run_info(self) -> RunInfo:
        assert self._session is not None
        return self._session.run_info

    async def run(self, job: Callable[[Session], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        session = self._session

        def settle(ok: bool, value: Any) -> None:
            if not future.done():
                (future.set_result if ok else future.set_exception)(value)

        def work() -> None:
            try:
                if session is None:
                    raise RuntimeError("the server's model is not open")
                value = job(session)
            except BaseException as exc:
                loop.call_soon_threadsafe(settle, False, exc)
            else:
                loop.call_soon_threadsafe(settle, True, value)

        self._thread.submit(work)
        # The engine finishes the job even when the awaiting request is cancelled.
        return await asyncio.shield(future)

    def close(self) -> None:
        """Blocking: close the session on the engine thread, then end the thread."""
        session, self._session = self._session, None
        if session is not None:
            self._thread.call(session.close)
        self._thread.stop()
        self._thread.join()
