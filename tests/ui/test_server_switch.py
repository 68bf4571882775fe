"""Tools > Serve the model on localhost: the window's model answers the real `openai` client,
the live plots follow the server's request, a label names the client, and off means off."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.server.conftest import free_port
from tests.ui.user_actions import WAIT, send

pytestmark = pytest.mark.slow


def test_the_window_serves_its_model_and_plots_the_requests(qtbot, make_window, run,
                                                           qasync_policy):
    """Under the loop policy qasync.run installs (on 3.11 the server thread's asyncio.run built
    a Qt loop: "Event loop stopped before Future completed", curl refused: issue 39)."""
    import openai

    window = make_window()
    switch = window.server_switch
    switch.port = free_port()
    switch.action.setChecked(True)  # what the menu item does
    qtbot.waitUntil(lambda: (switch.running and "no request yet" in switch.label.text())
                    or not switch.action.isChecked(), timeout=WAIT)
    assert switch.running, switch.label.text()
    # A plain HTTP request, as curl makes it.
    listed = httpx.get(switch.url + "/models", timeout=30)
    assert listed.status_code == 200 and listed.json()["data"]
    x_before = window.telemetry.next_x
    client = openai.OpenAI(base_url=switch.url, api_key="none", max_retries=0, timeout=120)
    with ThreadPoolExecutor(1) as pool:  # the UI thread keeps spinning meanwhile
        future = pool.submit(lambda: client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Name a colour."}],
            max_tokens=6, temperature=0, user="test-editor"))
        qtbot.waitUntil(future.done, timeout=WAIT)
    reply = future.result()
    assert reply.model == window.chat.model.name.removesuffix(".gguf")
    n = reply.usage.completion_tokens
    assert n > 0
    # The plots got the request's token rows, in a turn of their own.
    qtbot.waitUntil(lambda: window.telemetry.next_x == x_before + n, timeout=WAIT)
    qtbot.waitUntil(lambda: switch.served == 1, timeout=WAIT)
    assert "test-editor" in switch.label.text() and switch.label.isVisible()
    # Kept as a run, like a chat turn: headless, named after the client, with its token rows.
    qtbot.waitUntil(lambda: not switch._saving, timeout=WAIT)
    runs = run(window.db.call(lambda s: s.list_runs(headless=True)))
    kept = [r for r in runs if "test-editor" in r.label]
    assert len(kept) == 1 and kept[0].label.startswith("server · ")
    rows = run(window.db.call(lambda s: s.token_rows(kept[0].id)))
    assert len(rows) == n
    # The window's own chat goes on with its own settings and conversation.
    send(qtbot, window, "Name a fruit.")
    assert window.chat.last_result.ok
    switch.action.setChecked(False)
    qtbot.waitUntil(lambda: not switch.running and switch.label.text() == "", timeout=WAIT)
    with pytest.raises(httpx.TransportError):
        httpx.get(switch.url + "/models", timeout=2)


def test_a_port_in_use_is_said_and_the_switch_goes_back_off(qtbot, make_window):
    import socket

    window = make_window()
    switch = window.server_switch
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        switch.port = taken.getsockname()[1]
        switch.action.setChecked(True)
        qtbot.waitUntil(lambda: not switch.action.isChecked(), timeout=WAIT)
    assert "could not listen" in switch.label.text()
