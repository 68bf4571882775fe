"""A real server on a free localhost port: uvicorn in a thread, the real engine on its own
engine thread, the default chat model (SmolLM2-135M-Instruct)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from workbench.config import Config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Recorder:
    """A ServerObserver that keeps what the engine did for each request."""

    started: list[Any] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)
    ended: list[tuple[Any, Any]] = field(default_factory=list)
    picked: dict[str, list[int]] = field(default_factory=dict)  # token ids, per request
    threads: set[int] = field(default_factory=set)

    def request_started(self, request: Any) -> None:
        self.threads.add(threading.get_ident())
        self.started.append(request)

    def token(self, request: Any, event: Any) -> None:
        self.tokens[request.id] = self.tokens.get(request.id, 0) + 1
        self.picked.setdefault(request.id, []).append(event.metrics.token_id)

    def request_ended(self, request: Any, result: Any) -> None:
        self.ended.append((request, result))

    def result_of(self, rid: str, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for request, result in self.ended:
                if request.id == rid:
                    return result
            time.sleep(0.01)
        raise AssertionError(f"request {rid} never ended on the engine")


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT
    model: str
    runner: Any
    engine: Any
    recorder: Recorder
    api_key: str | None = None

    @property
    def base(self) -> str:
        return self.url + "/v1"

    def client(self, **kw: Any) -> Any:
        import openai

        return openai.OpenAI(base_url=self.base, api_key=self.api_key or "none", max_retries=0,
                             timeout=60, **kw)

    def idle(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.runner.admission.in_flight == 0:
                return True
            time.sleep(0.01)
        return False


def start_server(engine: Any, *, api_key: str | None = None, max_waiting: int = 8,
                 max_body_bytes: int | None = None) -> tuple[Served, Callable[[], None]]:
    import uvicorn

    from workbench.server.app import MAX_BODY_BYTES, create_app
    from workbench.server.engine_host import model_id
    from workbench.server.runner import Runner

    recorder = Recorder()
    runner = Runner(engine, max_waiting=max_waiting, observer=recorder)
    model = model_id(engine.run_info)
    app = create_app(runner, model, api_key=api_key,
                     max_body_bytes=max_body_bytes or MAX_BODY_BYTES)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)

    def stop() -> None:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive()

    return Served(f"http://127.0.0.1:{port}", model, runner, engine, recorder, api_key), stop


@pytest.fixture(scope="session")
def chat_engine(chat_model_path) -> Iterator[Any]:
    from workbench.server.engine_host import OwnEngine

    engine = OwnEngine()
    engine.open(Config().replace(model=str(chat_model_path), n_threads=1, n_ctx=1024,
                                 n_predict=64, kv_pool_mb=64))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def served(chat_engine) -> Iterator[Served]:
    server, stop = start_server(chat_engine, max_body_bytes=64 << 10)
    yield server
    stop()
