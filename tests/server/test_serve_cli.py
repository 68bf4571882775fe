"""`workbench serve` as a user starts it: a process, Ctrl-C drains and stops, SIGINT handled even
when inherited ignored, the --host warning."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.server.conftest import free_port
from workbench.cli.serve import exposure_warning

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _start(model, port: int, *extra: str) -> subprocess.Popen:
    # SIGINT ignored in the child, as a shell's `&` leaves it: the server must set its own.
    return subprocess.Popen(
        [sys.executable, "-m", "workbench", "serve", "-m", str(model), "--port", str(port),
         "--n-threads", "1", *extra],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def _wait_ready(proc: subprocess.Popen, url: str, headers: dict | None = None) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            if httpx.get(url + "/health", headers=headers, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("the server did not come up")


def test_ctrl_c_lets_the_running_answer_finish_then_stops(chat_model_path, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    csv = tmp_path / "serve.csv"
    proc = _start(chat_model_path, port, "--api-key", "k", "--csv", str(csv))
    try:
        headers = {"Authorization": "Bearer k"}
        _wait_ready(proc, url, headers)
        body = {"prompt": "1, 2, 3, 4, 5, 6, 7,", "max_tokens": 40, "temperature": 0,
                "stream": True}
        with httpx.Client(timeout=60) as client, client.stream(
                "POST", url + "/v1/completions", json=body, headers=headers) as r:
            lines = r.iter_lines()
            first = next(line for line in lines if line.startswith("data: {"))
            proc.send_signal(signal.SIGINT)  # mid-answer
            rest = [line for line in lines if line.startswith("data: ")]
        assert rest[-1] == "data: [DONE]"
        finish = json.loads(rest[-2][6:])["choices"][0]["finish_reason"]
        assert finish == "length"  # drained: the whole answer, not a cut one
        assert json.loads(first[6:])["choices"][0]["text"]
        code = proc.wait(60)
        err = proc.stderr.read()
        assert code == 0, err
        assert "stopped: 1 requests served" in err
        # New connections are refused once it stopped.
        with pytest.raises(httpx.TransportError):
            httpx.get(url + "/health", timeout=2)
        text = csv.read_text()
        assert text.startswith("# bmoe_metrics") and text.count("\n") > 40
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_only_a_non_loopback_host_is_warned_about():
    assert exposure_warning("127.0.0.1", 8080, None) is None
    assert exposure_warning("127.0.0.2", 8080, None) is None
    assert exposure_warning("::1", 8080, None) is None
    assert exposure_warning("localhost", 8080, None) is None
    warning = exposure_warning("0.0.0.0", 8080, None)
    assert "every machine" in warning and "--api-key" in warning
    assert "need the API key" in exposure_warning("192.168.1.5", 9, "k")


def test_the_serve_command_says_what_it_binds(chat_model_path):
    out = subprocess.run([sys.executable, "-m", "workbench", "serve", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "127.0.0.1" in out.stdout and "--api-key" in out.stdout
