"""Sending when things go wrong: nothing typed is lost, and a Stop at any moment stops.

Regressions for issue 12: case 3 (the composer cleared before the message was stored, so a
failed store lost it) and case 7 (a Stop pressed as an answer starts was lost).
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.ui.user_actions import WAIT, send
from workbench.store import Store, default_path


def _press_enter(qtbot, window, text: str) -> None:
    window.composer.prompt.setPlainText(text)
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)


def test_a_message_that_cannot_be_stored_stays_in_the_box(qtbot, make_window, run):
    window = make_window()
    run(window.db.call(lambda s: _read_only_on(s)))
    _press_enter(qtbot, window, "Keep this text")
    qtbot.waitUntil(lambda: "was not saved" in window.notice.text, timeout=WAIT)
    assert window.composer.prompt.toPlainText() == "Keep this text"
    assert not window.chat.generating and window.composer.button.text() == "Send"
    assert window.chat_view.messages == []
    run(window.db.call(lambda s: _read_only_off(s)))
    done = window.chat.turns_done
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)  # the user simply sends again
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)
    assert window.composer.prompt.toPlainText() == ""
    with Store.open(default_path(), recover=False) as store:
        user, answer = store.active_path(window.chat.conversation_id)
    assert user.content == "Keep this text" and answer.content


def _read_only_on(store) -> None:
    # Real SQLite refusing every write, as it does on a full or read-only disk.
    store._db.execute("PRAGMA query_only = ON")


def _read_only_off(store) -> None:
    store._db.execute("PRAGMA query_only = OFF")


# The steps of the start of an answer, each a moment the user may press Stop: before each of
# the window's database calls (storing the message, its answer, the run), and as the engine
# gets the request.
STEPS = ["db-1", "db-2", "db-3", "generate"]


@pytest.mark.parametrize("step", STEPS)
def test_a_stop_at_each_step_of_the_start_stops_the_answer(qtbot, make_window, model_config,
                                                           step):
    window = make_window(model_config.replace(n_predict=200))
    calls = {"db": 0}
    real_call, real_generate = window.db.call, window.bridge.generate

    async def call_then_maybe_stop(fn):
        calls["db"] += 1
        if step == f"db-{calls['db']}":
            window.chat.stop()
        return await real_call(fn)

    def generate_after_a_stop(request, *args):
        if step == "generate":
            window.chat.stop()
        return real_generate(request, *args)

    window.db.call = call_then_maybe_stop
    window.bridge.generate = generate_after_a_stop
    send(qtbot, window, "Count from 1 to 100.")
    window.db.call, window.bridge.generate = real_call, real_generate
    answer = window.chat_view.messages[-1]
    assert answer.shown.status == "stopped", step
    assert window.chat.last_result.summary is None or \
        window.chat.last_result.summary.n_generated == 0
    # The stop was spent on that answer: the next one runs, and a Stop during it works too.
    send(qtbot, window, "Say hello.")
    assert window.chat_view.messages[-1].shown.status in ("complete", "length")
    assert window.chat.last_result.summary.n_generated > 0
    done = window.chat.turns_done
    _press_enter(qtbot, window, "Write a very long story about a lighthouse keeper.")
    qtbot.waitUntil(lambda: window.status.state == "generating", timeout=WAIT)
    qtbot.mouseClick(window.composer.button, Qt.MouseButton.LeftButton)  # "Stop"
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)
    assert window.chat_view.messages[-1].shown.status == "stopped"


def test_a_stop_after_the_engine_finished_does_not_stop_the_next_answer(qtbot, make_window):
    """A Stop that lands while the answer is being saved, after the engine ended, has nothing
    to stop; it must not stay pending and stop the next answer instead."""
    window = make_window()
    send(qtbot, window, "Say hello.")
    window.bridge.cancel()  # the engine is idle: as a late Stop reaches it
    send(qtbot, window, "Say hello again.")
    assert window.chat_view.messages[-1].shown.status == "complete"
    assert window.chat.last_result.summary.n_generated > 0
