"""Per-conversation system prompt and sampling settings in the window, on the real model: set
from the conversation's header dialog, used by its answers, restored when it is opened again;
a new conversation starts from the global settings (the Settings dock's)."""

from __future__ import annotations

from tests.ui.user_actions import WAIT, send
from workbench.store import Store, default_path
from workbench.ui.chat.qt_conversation_header import QtConversationSettingsDialog

PIRATE = "You are a pirate. Answer like one."


def engine_config(qtbot, window):
    """The settings the next answer's request carries (the controller's TurnSettings.of its
    config); the session keeps none of its own (a request is a value)."""
    from workbench.engine.turn_settings import TurnSettings

    return TurnSettings.of(window.chat.config)


def edit_in_dialog(qtbot, window, **changes) -> None:
    task = window.tasks.spawn(window.edit_conversation_settings())
    qtbot.waitUntil(lambda: window.findChild(QtConversationSettingsDialog) is not None
                    and window.findChild(QtConversationSettingsDialog).isVisible(), timeout=WAIT)
    dialog = window.findChild(QtConversationSettingsDialog)
    assert "model" not in dialog.panel.rows and "n_ctx" not in dialog.panel.rows
    assert "system_prompt" in dialog.panel.rows and "temp" in dialog.panel.rows
    dialog.panel.set_pending(dialog.panel.current.replace(**changes))
    dialog.panel.apply_button.click()
    qtbot.waitUntil(task.done, timeout=WAIT)
    assert task.result() is True


def test_a_conversation_keeps_its_own_prompt_and_sampling(qtbot, make_window):
    window = make_window()
    send(qtbot, window, "Hello.")
    pirate_chat = window.chat.conversation_id
    edit_in_dialog(qtbot, window, system_prompt=PIRATE, temp=0.8, seed=7)
    assert engine_config(qtbot, window).system_prompt == PIRATE  # the next answer uses it
    assert "pirate" in window.conversation_header.label.text()
    send(qtbot, window, "Where is the treasure?")
    with Store.open(default_path(), recover=False) as store:
        kept = store.conversation_settings(pirate_chat)
    assert kept["system_prompt"] == PIRATE and kept["temp"] == 0.8

    # A new conversation starts from the global settings: no prompt, greedy.
    window.tasks.spawn(window.conversations.open(None), name="open-conversation")
    qtbot.waitUntil(lambda: window.chat.conversation_id is None
                    and window.config.system_prompt == "", timeout=WAIT)
    assert engine_config(qtbot, window).temp == 0.0
    assert window.conversation_header.label.text() == "No system prompt · greedy"
    send(qtbot, window, "Hi.")
    plain_chat = window.chat.conversation_id

    # Back to the pirate conversation: its settings come back, on the open session.
    window.tasks.spawn(window.conversations.open(pirate_chat), name="open-conversation")
    qtbot.waitUntil(lambda: window.config.system_prompt == PIRATE, timeout=WAIT)
    config = engine_config(qtbot, window)
    assert (config.system_prompt, config.temp, config.seed) == (PIRATE, 0.8, 7)
    assert window.settings_page.panel.current.system_prompt == PIRATE
    window.tasks.spawn(window.conversations.open(plain_chat), name="open-conversation")
    qtbot.waitUntil(lambda: window.config.system_prompt == "", timeout=WAIT)


def test_the_settings_dock_sets_the_global_defaults(qtbot, make_window):
    window = make_window()
    page = window.settings_page.panel
    page.set_pending(page.current.replace(system_prompt="Be brief."))
    page.apply_button.click()
    qtbot.waitUntil(lambda: window.global_config.system_prompt == "Be brief.", timeout=WAIT)
    send(qtbot, window, "Hello.")
    first = window.chat.conversation_id
    edit_in_dialog(qtbot, window, system_prompt="Be long.")
    assert window.global_config.system_prompt == "Be brief."  # the dialog is this chat's only
    window.tasks.spawn(window.conversations.open(None), name="open-conversation")
    qtbot.waitUntil(lambda: window.config.system_prompt == "Be brief.", timeout=WAIT)
    window.tasks.spawn(window.conversations.open(first), name="open-conversation")
    qtbot.waitUntil(lambda: window.config.system_prompt == "Be long.", timeout=WAIT)
