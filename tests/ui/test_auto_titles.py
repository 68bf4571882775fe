"""Automatic conversation titles in the window, with the real model: named after the first
answer, in the background; a Send cancels the title turn instead of waiting for it; a name the
user gave is kept."""

from __future__ import annotations

from tests.ui.user_actions import WAIT, send
from workbench.store import Store, default_path
from workbench.ui.chat import auto_title

QUESTION = "What is the capital of France?"


def stored_title(window) -> str:
    with Store.open(default_path(), recover=False) as store:
        return store.get_conversation(window.chat.conversation_id).title


def test_the_first_answer_names_the_conversation(qtbot, make_window, model_config):
    window = make_window(model_config.replace(auto_title=True))
    send(qtbot, window, QUESTION)
    qtbot.waitUntil(lambda: window.chat.titles_done == 1, timeout=WAIT)
    title = stored_title(window)
    assert title and title != auto_title.placeholder_title(QUESTION)
    assert len(title) <= auto_title.TITLE_CHARS + 1 and "\n" not in title
    qtbot.waitUntil(lambda: window.conversation_list.list.item(0).text() == title, timeout=WAIT)
    # The next answer is the conversation's own again: its KV state came back from the pool.
    send(qtbot, window, "And of Italy?")
    summary = window.chat.last_result.summary
    assert summary.kv_source == "memory" and summary.n_reused > 0
    assert window.chat.titles_done == 1  # only the first answer asks for a title


def test_the_title_turn_states_its_own_settings(qtbot, make_window, model_config):
    """Issue 37: the title turn does not inherit the chat's sampler or system prompt."""
    chat = model_config.replace(auto_title=True, temp=1.2, seed=5, repeat_penalty=1.3,
                                system_prompt="Answer like a pirate.")
    window = make_window(chat)
    sent = []
    real = window.bridge.generate

    def recording(request, stop=None):
        sent.append(request)
        return real(request, stop)

    window.bridge.generate = recording
    send(qtbot, window, QUESTION)
    qtbot.waitUntil(lambda: window.chat.titles_done == 1, timeout=WAIT)
    answer, title = sent
    assert answer.settings.system_prompt == "Answer like a pirate."  # the chat's, sent along
    assert (answer.settings.temp, answer.settings.seed) == (1.2, 5)
    assert title.settings == auto_title.title_settings()
    assert (title.settings.temp, title.settings.repeat_penalty, title.settings.system_prompt,
            title.settings.think, title.history) == (0.0, 1.0, "", False, ())
    assert window.session.config.temp == 1.2  # and the chat's settings are still its own


def test_a_send_cancels_the_title_turn_instead_of_waiting(qtbot, make_window, model_config,
                                                          monkeypatch):
    # A title that would take long: the second message must not wait for it.
    monkeypatch.setattr(auto_title, "TITLE_TOKENS", 400)
    window = make_window(model_config.replace(auto_title=True, n_ctx=1024))
    send(qtbot, window, QUESTION)
    qtbot.waitUntil(lambda: window.bridge.generating, timeout=WAIT)  # the title turn runs
    send(qtbot, window, "And of Italy?")
    assert window.chat.titles_cancelled == 1 and window.chat.titles_done == 1
    assert window.chat_view.messages[-1].shown.status == "complete"
    assert stored_title(window) == auto_title.placeholder_title(QUESTION)  # unchanged


def test_a_title_the_user_typed_meanwhile_is_kept(qtbot, make_window, model_config, run):
    window = make_window(model_config.replace(auto_title=True))
    send(qtbot, window, QUESTION)
    run(window.conversations.rename(window.chat.conversation_id, "My own name"))
    qtbot.waitUntil(lambda: window.chat.titles_done == 1, timeout=WAIT)
    assert stored_title(window) == "My own name"


def test_titles_off_leaves_the_placeholder(qtbot, make_window, model_config):
    window = make_window(model_config)  # auto_title=False
    send(qtbot, window, QUESTION)
    assert window.chat.titles_done == 0 and not window.bridge.generating
    assert stored_title(window) == auto_title.placeholder_title(QUESTION)
