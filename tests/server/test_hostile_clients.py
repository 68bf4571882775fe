"""Hostile clients against a real server on 127.0.0.1 (no model needed: each refusal here comes
before the engine): text JSON carries but UTF-8 cannot, bodies that never end, the Bearer
scheme in any case, and `serve` on a port already in use."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from tests.server.conftest import free_port
from workbench.server.app import create_app
from workbench.server.runner import Runner
from workbench.ui.bridge import EngineBridge
from workbench.ui.qt_server_switch import _BridgeHost

REPO = Path(__file__).resolve().parents[2]
KEY = "s3cret"
USER = '{"role": "user", "content": "hi"}'


@pytest.fixture
def server(caplog) -> Iterator[str]:
    """A server with an API key over a bridge with no model (a request that reached the engine
    would be a 503), its log records captured (log_config=None: they reach caplog)."""
    caplog.set_level(logging.INFO)
    bridge = EngineBridge()
    port = free_port()
    app = create_app(Runner(_BridgeHost(bridge)), "none", api_key=KEY)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                                           log_level="info"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        asyncio.run(bridge.close())


def _post(url: str, route: str, body: bytes, auth: str = f"Bearer {KEY}") -> httpx.Response:
    return httpx.post(url + route, content=body, timeout=30,
                      headers={"Content-Type": "application/json", "Authorization": auth})


# A lone surrogate, as JSON escapes it: valid JSON, text no encoder can write.
LONE = r"\ud800"
SURROGATE_BODIES = [
    ("/v1/chat/completions", f'{{"messages": [{{"role": "user", "content": "a{LONE}b"}}]}}',
     "messages[0].content"),
    ("/v1/chat/completions", f'{{"messages": [{{"role": "system", "content": "{LONE}"}}, {USER}]}}',
     "messages[0].content"),
    ("/v1/chat/completions", f'{{"messages": [{{"role": "user", "content": [{{"type": "text", '
     f'"text": "{LONE}"}}]}}]}}', "messages[0].content[0].text"),
    ("/v1/chat/completions", f'{{"messages": [{USER}], "stop": ["ok", "{LONE}"]}}', "stop[1]"),
    ("/v1/chat/completions", f'{{"messages": [{USER}], "user": "{LONE}"}}', "user"),
    ("/v1/chat/completions", f'{{"messages": [{USER}], "metadata": {{"x": ["{LONE}"]}}}}',
     "metadata.x[0]"),
    ("/v1/completions", f'{{"prompt": "once {LONE} upon"}}', "prompt"),
    ("/v1/completions", f'{{"prompt": ["{LONE}"]}}', "prompt[0]"),
    ("/v1/completions", f'{{"prompt": "once", "stop": "{LONE}"}}', "stop"),
    ("/v1/completions", f'{{"prompt": "once", "model": "{LONE}"}}', "model"),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("route", "body", "param"), SURROGATE_BODIES)
def test_text_utf8_cannot_encode_is_a_400_naming_the_field(server, route, body, param, stream):
    body = body[:-1] + f', "stream": {"true" if stream else "false"}}}'
    r = _post(server, route, body.encode())
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["code"] == "invalid_text"
    assert "surrogate" in error["message"] and "UTF-8" in error["message"]


def test_the_bearer_scheme_is_case_insensitive(server):
    for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
        r = httpx.get(server + "/v1/models", headers={"Authorization": f"{scheme} {KEY}"})
        assert r.status_code == 200, (scheme, r.text)
    for auth in (f"Basic {KEY}", KEY, f"Bearer{KEY}", "Bearer", f"Bearer {KEY}x", ""):
        r = httpx.get(server + "/v1/models", headers={"Authorization": auth})
        assert r.status_code == 401, auth
    import openai  # the real client sends "Bearer KEY"

    client = openai.OpenAI(base_url=server + "/v1", api_key=KEY, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["none"]


def _send_raw(url: str, data: bytes, *, read: bool = False) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        if not read:
            time.sleep(0.2)  # let the server take what was sent, then leave
            return b""
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def _head(length: str | None = None, chunked: bool = False) -> bytes:
    lines = ["POST /v1/chat/completions HTTP/1.1", "Host: 127.0.0.1",
             "Content-Type: application/json", f"Authorization: Bearer {KEY}"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


LEAVERS = {
    "content-length never reached": _head("1000") + b'{"messages": [',
    "chunked body abandoned": _head(chunked=True) + b'10\r\n{"messages": [{"ro\r\n',
    "chunk size not a number": _head(chunked=True) + b"zz\r\nabc\r\n",
    "chunk longer than declared": _head(chunked=True) + b"2\r\nabcdef\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("name", list(LEAVERS))
def test_a_client_leaving_mid_body_is_one_log_line_and_the_server_stays_up(server, caplog,
                                                                            name):
    caplog.clear()
    _send_raw(server, LEAVERS[name], read=name.startswith("chunk "))
    time.sleep(0.3)
    # Served next: a health check and a whole request through the same parser.
    assert httpx.get(server + "/health", headers={"Authorization": f"Bearer {KEY}"}).status_code \
        == 200
    r = _post(server, "/v1/completions", f'{{"prompt": "{LONE}"}}'.encode())
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
    records = [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert not [rec for rec in records if rec.exc_info], [rec.getMessage() for rec in records]
    text = "\n".join(rec.getMessage() for rec in caplog.records)
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text
    assert len(records) == 1, [rec.getMessage() for rec in records]
    assert "\n" not in records[0].getMessage()


def test_serve_on_a_port_in_use_says_so_and_never_claims_to_serve():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-m", "workbench", "serve", "--port", str(port),
                               "-m", str(REPO / "no-such-model.gguf")], capture_output=True,
                              text=True, timeout=120, env=env, cwd=REPO)
    assert done.returncode == 1, done.stderr
    assert f"cannot listen on 127.0.0.1 port {port}" in done.stderr
    assert "in use" in done.stderr
    assert "serving" not in done.stderr and "Traceback" not in done.stderr
