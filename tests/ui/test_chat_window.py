"""The window against the real engine and the embedded model: stream, stop, regenerate, edit,
errors, context overflow, plots."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt

from tests.ui.user_actions import WAIT, send
from workbench.store import Store, default_path


def stored_path(window) -> list:
    with Store.open(default_path(), recover=False) as store:
        return store.active_path(window.chat.conversation_id)


def test_a_prompt_streams_into_the_pane_and_is_saved(qtbot, make_window):
    window = make_window()
    assert window.status.state == "idle" and window.composer.gauge.n_ctx == 512
    window.composer.prompt.setPlainText("Say hello.")
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)
    # The answer is in progress from the press of Enter; its widget comes once both messages
    # are stored.
    qtbot.waitUntil(lambda: len(window.chat_view.messages) == 2, timeout=WAIT)
    answer = window.chat_view.messages[-1]
    assert window.composer.button.text() == "Stop"
    # Text appears while the answer is still streaming.
    qtbot.waitUntil(lambda: bool(answer.body.markdown) or not window.chat.generating,
                    timeout=WAIT)
    qtbot.waitUntil(lambda: not window.chat.generating, timeout=WAIT)
    assert [w.shown.role for w in window.chat_view.messages] == ["user", "assistant"]
    assert answer.shown.status == "complete" and answer.body.markdown
    assert "tok/s" in answer.stats.text() and "16 tokens" in answer.stats.text()
    assert window.status.state == "idle" and window.composer.button.text() == "Send"
    assert 0 < window.composer.gauge.used < 512
    user, assistant = stored_path(window)
    assert user.content == "Say hello." and assistant.content == answer.shown.content
    assert assistant.stats.run_id and assistant.status == "complete"
    assert window.conversation_list.ids() == [window.chat.conversation_id]


def test_plots_receive_the_rows_of_a_run(qtbot, make_window):
    window = make_window()
    send(qtbot, window, "Name a colour.")
    send(qtbot, window, "Another one.")
    panel = window.telemetry
    # The repaint timer brings every plot up to date (one column per tick).
    qtbot.waitUntil(lambda: panel.repaints > 0 and not panel._dirty and not panel._stale,
                    timeout=WAIT)
    data = panel.ring.view()
    assert data[:, 0].tolist() == list(range(32))  # x runs across both turns
    assert data[:, 1].tolist() == [0] * 16 + [1] * 16
    wall = panel.ring.column("wall_ms")
    assert (wall > 0).all()
    assert all(math.isnan(v) for v in panel.ring.column("io_ms"))  # unmeasured: a gap
    curves = {panel.ring.columns[col]: item for item, col in panel.curves}
    assert len(curves["cpu_cores"].getData()[0]) == 32
    assert curves["read_mib"].getData()[0] is None or len(curves["read_mib"].getData()[0]) == 0
    assert panel._empty_labels["read"].isVisible() and not panel._empty_labels["wall"].isVisible()
    with Store.open(default_path(), recover=False) as store:
        run_id = stored_path(window)[-1].stats.run_id
        assert len(store.token_rows(run_id)) == 16
    # Reopening the conversation refills the plots from the database.
    run_ = window.tasks.spawn(window.chat.open_conversation(window.chat.conversation_id))
    qtbot.waitUntil(run_.done, timeout=WAIT)
    assert panel.ring.written == 32 and panel.turn == 1


def test_clicking_a_token_highlights_it_on_every_plot(qtbot, make_window):
    window = make_window()
    send(qtbot, window, "Hi")
    answer = window.chat_view.messages[-1]
    answer.tokens_button.click()
    assert answer.token_view.isVisible() and "tok:3" in answer.token_view.text()
    answer.token_view.linkActivated.emit("tok:3")
    assert window.telemetry.highlighted_x == answer.shown.stats.x_start + 3
    assert "token 3" in window.telemetry.readout.text()
    assert not window.telemetry.following

    # The other way: a span selected on the plots marks its tokens in the answer, opening the
    # token view if it is closed.
    answer.tokens_button.click()
    assert not answer.token_view.isVisible()
    x0 = answer.shown.stats.x_start
    window.telemetry.select_span(x0 + 2, x0 + 5)
    assert answer.token_view.isVisible()
    assert answer.token_view.text().count("#ffd54f") == 4
    assert window.telemetry.span_readout.text().startswith(
        f"tokens {x0 + 2}–{x0 + 5} (4, turn 0): ")
    window.telemetry.clear_span()
    assert "#ffd54f" not in answer.token_view.text()


def test_stop_keeps_the_partial_answer_marked_and_the_next_prompt_works(qtbot, make_window,
                                                                         model_config):
    window = make_window(model_config.replace(n_predict=400))
    window.composer.prompt.setPlainText("Write a long story about the sea.")
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.telemetry.next_x >= 3, timeout=WAIT)
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Escape)
    assert window.status.state == "stopping" and window.composer.button.text() == "Stopping…"
    qtbot.waitUntil(lambda: not window.chat.generating, timeout=WAIT)
    stopped = window.chat_view.messages[-1]
    assert stopped.shown.status == "stopped" and stopped.shown.content
    assert stopped.badge.text() == "stopped"
    assert "not part of the model's context" in stopped.note.text()
    assert "stopped by you" in stopped.stats.text()
    assert stored_path(window)[-1].status == "stopped"

    window.session.config = window.session.config.replace(n_predict=8)
    send(qtbot, window, "Thanks.")
    last = window.chat_view.messages[-1]
    assert last.shown.status == "complete" and len(window.chat_view.messages) == 4
    # The request carried only the complete turns, as the screen says (the stopped answer and
    # its question are not part of the model's context): the conversation after it is this.
    history = [m["content"] for m in window.chat.last_result.history]
    assert history == ["Thanks.", last.shown.content]


def qtbot_run(qtbot, window, fn):
    task = window.tasks.spawn(window.bridge._call(lambda: fn(window.bridge._session)))
    qtbot.waitUntil(task.done, timeout=WAIT)
    return task.result()


def test_regenerate_and_edit_make_siblings(qtbot, make_window):
    window = make_window()
    send(qtbot, window, "Pick a number.")
    first = window.chat_view.messages[-1]
    first_id = first.shown.id
    done = window.chat.turns_done
    first.regenerate_button.click()
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)
    second = window.chat_view.messages[-1]
    assert second.shown.id != first_id and second.version_label.text() == "2/2"
    assert second.prev_button.isEnabled() and not second.next_button.isEnabled()
    second.prev_button.click()
    qtbot.waitUntil(lambda: window.chat_view.messages[-1].shown.id == first_id, timeout=WAIT)
    assert window.chat_view.messages[-1].version_label.text() == "1/2"

    user = window.chat_view.messages[0]
    user.edit_button.click()
    user.editor.setPlainText("Pick a letter.")
    done = window.chat.turns_done
    user.save_button.click()
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)
    edited = window.chat_view.messages[0]
    assert edited.shown.content == "Pick a letter." and edited.version_label.text() == "2/2"
    assert window.chat_view.messages[-1].shown.status == "complete"
    with Store.open(default_path(), recover=False) as store:
        roots = store.siblings(edited.shown.id)
        assert [m.content for m in roots.messages] == ["Pick a number.", "Pick a letter."]
        assert store.siblings(first_id).count == 2  # nothing was erased


def test_a_bad_model_file_shows_an_error_and_the_app_keeps_running(qtbot, make_window, tmp_path,
                                                                   model_config):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 16)
    window = make_window(model_config.replace(model=str(bad)))
    assert window.notice.kind == "error" and "broken.gguf" in window.notice.text
    assert "Fetch the model again" in window.notice.text or "GGUF" in window.notice.text
    assert window.chat.model is None and not window.composer.button.isEnabled()
    assert window.status.state == "no model"
    task = window.tasks.spawn(window.load_model(model_config))
    qtbot.waitUntil(task.done, timeout=WAIT)
    assert window.notice.kind == ""  # the error is gone once a model loads
    send(qtbot, window, "Hello")
    assert window.chat_view.messages[-1].shown.status == "complete"


def test_context_overflow_is_a_message_with_what_to_do(qtbot, make_window, model_config):
    window = make_window(model_config.replace(n_predict=500))
    send(qtbot, window, "Tell me everything you know about the history of tea.")
    answer = window.chat_view.messages[-1]
    assert answer.shown.status == "rejected" and answer.badge.text() == "not sent"
    assert "more than the context of 512 tokens" in answer.error.text()
    assert "Start a new chat" in answer.error.text()
    assert window.status.state == "idle" and window.composer.button.isEnabled()


def test_stop_during_a_long_prefill(qtbot, make_window, model_config):
    # Small prefill chunks make reading a long prompt take many decode calls.
    window = make_window(model_config.replace(n_batch=8, n_ctx=1024))
    long_prompt = " ".join(f"item {i} is the number {i}." for i in range(60))
    window.composer.prompt.setPlainText(long_prompt)
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: " of " in window.status.state_label.text()
                    or window.chat.turns_done > 0, timeout=WAIT)
    assert window.status.state == "prefill" and window.telemetry.next_x == 0
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not window.chat.generating, timeout=WAIT)
    stopped = window.chat_view.messages[-1]
    assert stopped.shown.status == "stopped" and window.telemetry.next_x == 0
    assert stopped.shown.stats.stop_reason == "stopped"
    send(qtbot, window, "Short one.")
    assert window.chat_view.messages[-1].shown.status == "complete"
