"""The window's server with no model loaded (closed under it): an OpenAI-style 503, and the
queue place is given back."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import uvicorn

from tests.server.conftest import free_port
from workbench.server.app import create_app
from workbench.server.runner import Runner
from workbench.ui.bridge import EngineBridge
from workbench.ui.qt_server_switch import _BridgeHost


def test_no_model_is_a_503_with_an_error_body():
    bridge = EngineBridge()
    runner = Runner(_BridgeHost(bridge))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(runner, "none"), host="127.0.0.1",
                                           port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                       json={"messages": [{"role": "user", "content": "hi"}]}, timeout=30)
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "model_not_loaded"
        assert "no model is loaded" in r.json()["error"]["message"]
        assert runner.admission.in_flight == 0
    finally:
        server.should_exit = True
        thread.join(30)
        asyncio.run(bridge.close())
