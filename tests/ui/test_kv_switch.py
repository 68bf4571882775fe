"""The window keeps each conversation's KV state: going back to one reads only the new turn
(issue 13), as the engine's own counters say."""

from __future__ import annotations

from tests.ui.user_actions import WAIT, send


def test_switching_a_b_a_does_not_reread_a(qtbot, make_window):
    window = make_window()
    send(qtbot, window, "Name three colours of the rainbow.")
    conversation_a = window.chat.conversation_id
    first = window.chat.last_result.summary
    task = window.tasks.spawn(window.chat.open_conversation(None))  # "New chat"
    qtbot.waitUntil(task.done, timeout=WAIT)
    send(qtbot, window, "Name three kinds of trees.")
    assert window.chat.conversation_id != conversation_a
    task = window.tasks.spawn(window.conversations.open(conversation_a))
    qtbot.waitUntil(lambda: task.done() and window.chat.conversation_id == conversation_a,
                    timeout=WAIT)
    send(qtbot, window, "Which of them is the warmest?")
    back = window.chat.last_result.summary
    assert back.kv_source == "memory"
    # Everything of A before this turn came from the kept state: its first prompt and answer.
    assert back.n_reused >= first.n_prompt + first.n_reused
    assert back.n_prompt < back.n_reused
    assert "from memory" in window.chat_view.messages[-1].stats.text()


def test_the_composer_forecasts_what_a_draft_will_read(qtbot, make_window):
    window = make_window()
    send(qtbot, window, "Name three colours of the rainbow.")
    window.composer.prompt.setPlainText("Which of them is the warmest?")
    qtbot.waitUntil(lambda: window.composer.forecast.text().startswith("reads "), timeout=WAIT)
    shown = window.composer.forecast.text()
    done = window.chat.turns_done
    window.chat.composer.send_requested.emit(window.composer.prompt.toPlainText())
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)
    summary = window.chat.last_result.summary
    assert shown.startswith(f"reads {summary.n_prompt:,} new token")
    assert f"{summary.n_reused:,} kept" in shown
    assert window.composer.forecast.text() == ""  # sent: the draft is gone
