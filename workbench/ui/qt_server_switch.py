"""Tools > Serve the model on localhost: the window's loaded model on the OpenAI API.

The server (workbench/server/, Qt-free) runs uvicorn on a thread of its own, with its own event
loop, and sends its requests to the window's engine thread through the bridge, so the window
and the server share one model, one engine thread and one KV pool (the server's conversations
are kept apart under their own keys). While it is on, the live plots follow the server's
requests as they follow the window's answers, a status-bar label names the client, and each
request is kept in the store as a run with its token rows (the Runs page lists it).
Only 127.0.0.1: exposing the model further is `workbench serve --host`'s job, with its warning.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QStatusBar

from workbench.server.telemetry import RequestInfo

log = logging.getLogger("workbench.ui.server")
DEFAULT_PORT = 8080
HOST = "127.0.0.1"


class _BridgeHost:
    """The server's EngineHost over the window's bridge."""

    def __init__(self, bridge: Any) -> None:
        self.bridge = bridge

    async def run(self, job: Any) -> Any:
        return await self.bridge.run_on_session(job)


class QtServerSwitch(QObject):
    # Engine thread -> UI thread (queued): (what, request, payload).
    _observed = Signal(str, object, object)
    state_changed = Signal(str)  # the label's text

    def __init__(self, bridge: Any, telemetry: Any, status: QStatusBar, parent: QObject,
                 port: int = DEFAULT_PORT, db: Any = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.db = db  # the window's AsyncStore: each request is kept as a headless run
        self._rows: dict[str, list[Any]] = {}  # the running request's token rows
        self._run_info: Any = None
        self._saving: set[asyncio.Task[Any]] = set()
        self.telemetry = telemetry
        self.port = port
        self.label = QLabel("")
        self.label.setObjectName("serverLabel")
        self.label.setVisible(False)
        status.addPermanentWidget(self.label)
        self.action = QAction("Serve the model on &localhost (OpenAI API)", self)
        self.action.setCheckable(True)
        self.action.toggled.connect(self._toggled)
        self._observed.connect(self._on_observed)
        self._server: Any = None  # set on the server thread once it is made
        self._runner: Any = None
        self._stop_asked = False
        self._failure = ""  # why the server thread ended, when it was not asked to
        self._thread: threading.Thread | None = None
        self._watch = QTimer(self)
        self._watch.setInterval(50)
        self._watch.timeout.connect(self._check)
        self.served = 0  # requests answered since the switch was turned on

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._server is not None and bool(self._server.started)

    # ---- on and off ---------------------------------------------------------------------------

    def _toggled(self, on: bool) -> None:
        if on and self._thread is None:
            self.start()
        elif not on:
            self.stop_soon()

    def start(self) -> None:
        if not self.bridge.loaded:
            self._say("server: open a model first")
            self.action.setChecked(False)
            return
        self._stop_asked = False
        self._failure = ""
        self._thread = threading.Thread(target=self._serve, name="server", daemon=True)
        self._thread.start()
        self.served = 0
        self._say(f"server: starting on {self.url}…")
        self._watch.start()

    def _serve(self) -> None:
        # A plain selector loop, named: on Python < 3.12 qasync.run installs its Qt loop policy
        # globally, so asyncio.run here would build a Qt loop off the main thread, which stops
        # at once ("Event loop stopped before Future completed": issue 39).
        try:
            with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
                runner.run(self._main())
        except SystemExit:  # uvicorn exits this way when it cannot bind the port
            self._failure = f"could not listen on {HOST}:{self.port} (is it in use?)"
        except Exception as exc:
            log.exception("the server failed")
            self._failure = f"failed: {exc}"

    async def _main(self) -> None:
        """The server thread: the API names the model the window has loaded now."""
        import uvicorn

        from workbench.server.app import create_app
        from workbench.server.engine_host import model_id
        from workbench.server.runner import Runner

        self._run_info = await self.bridge.run_on_session(lambda session: session.run_info)
        name = model_id(self._run_info)
        runner = Runner(_BridgeHost(self.bridge), observer=_Observer(self._observed))
        server = uvicorn.Server(uvicorn.Config(create_app(runner, name), host=HOST,
                                               port=self.port, log_level="warning",
                                               lifespan="on"))
        self._server = server
        self._runner = runner
        if not self._stop_asked:
            await server.serve()

    def _check(self) -> None:
        """Timer: say when the server came up, or why it did not."""
        alive = self._thread is not None and self._thread.is_alive()
        if self.running and self.label.text().endswith("…"):
            self._say(f"server: {self.url} (no request yet)")
        if not alive:
            self._watch.stop()
            self._server = self._thread = None
            self._say(f"server: {self._failure}" if self._failure else "")
            self.action.blockSignals(True)
            self.action.setChecked(False)
            self.action.blockSignals(False)

    def stop_soon(self, say: bool = True) -> None:
        """Stop accepting; what was admitted finishes (the timer notices the thread's end)."""
        if self._thread is None:
            return
        self._stop_asked = True
        if self._server is not None:
            self._server.should_exit = True
        if say:
            self._say("server: stopping…")

    async def stop(self) -> None:
        """The window closes: stop the requests in progress (the model is about to go), then
        wait until the server's thread has ended."""
        thread = self._thread
        self.stop_soon(say=False)
        if self._runner is not None:
            self._runner.cancel_all()
        if thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, thread.join)
        if self._saving:  # the last requests' runs land before the database closes
            await asyncio.gather(*list(self._saving), return_exceptions=True)
        # No widget is touched here: at shutdown the window's may be gone already.
        self._server = self._thread = self._runner = None

    # ---- what the server's requests show ------------------------------------------------------

    def _on_observed(self, what: str, request: RequestInfo, payload: Any) -> None:
        if what == "started":
            self.telemetry.begin_turn()
            self._rows[request.id] = []
            self._say(f"server: answering {request.client}")
        elif what == "token":
            self.telemetry.append(payload.metrics)
            self._rows.setdefault(request.id, []).append(payload.metrics)
        else:
            self.served += 1
            self._keep_run(request, payload, self._rows.pop(request.id, []))
            summary = payload.summary
            done = (f"{summary.n_generated} tokens" if summary is not None
                    else str(payload.stop_reason))
            self._say(f"server: {request.client}, {done} · {self.served} served")

    def _keep_run(self, request: RequestInfo, result: Any, rows: list[Any]) -> None:
        """The request as a run in the store, like a chat turn's (headless: no message), with
        its token rows; the Runs page lists it under the client's name."""
        if self.db is None or self._run_info is None or result.summary is None:
            return
        info, summary, label = self._run_info, result.summary, f"server · {request.client}"

        def save(store: Any) -> None:
            run = store.create_run(info, summary=summary, label=label)
            if rows:
                store.add_token_rows(run.id, rows)

        task = asyncio.get_running_loop().create_task(self.db.call(save))
        self._saving.add(task)
        task.add_done_callback(self._saved)

    def _saved(self, task: asyncio.Task[Any]) -> None:
        self._saving.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("keeping a server request's run failed", exc_info=task.exception())

    def _say(self, text: str) -> None:
        self.label.setText(text)
        self.label.setVisible(bool(text))
        self.state_changed.emit(text)


class _Observer:
    """The runner's observer: every call (engine thread) becomes a queued signal."""

    def __init__(self, signal: Any) -> None:
        self.signal = signal

    def request_started(self, request: RequestInfo) -> None:
        self.signal.emit("started", request, None)

    def token(self, request: RequestInfo, event: Any) -> None:
        self.signal.emit("token", request, event)

    def request_ended(self, request: RequestInfo, result: Any) -> None:
        self.signal.emit("ended", request, result)
