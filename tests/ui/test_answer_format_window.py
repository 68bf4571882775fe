"""The answer format in the window: chosen in the conversation settings dialog (pasted, or a
schema loaded from a file), checked there (a schema the grammar cannot hold is an error under it
and Apply stays off, the text kept), and held by the answers of that conversation: a JSON answer
parses, a schema answer validates (slow: the bundled model)."""

from __future__ import annotations

import json

import jsonschema

from tests.ui.test_conversation_settings_window import edit_in_dialog
from tests.ui.user_actions import WAIT, send
from workbench.config import Config
from workbench.store import Store, default_path
from workbench.ui.chat.qt_conversation_header import QtConversationSettingsDialog

UNENFORCEABLE = json.dumps({"type": "string", "format": "no-such-format"})
# Bounded strings: every answer closes within the tokens it may take.
CAT = {"type": "object", "required": ["name", "mood"], "additionalProperties": False,
       "properties": {"name": {"type": "string", "maxLength": 12},
                      "mood": {"enum": ["calm", "wild"]}}}


def test_a_schema_that_cannot_be_enforced_is_an_error_in_the_dialog_and_nothing_is_lost(qtbot):
    dialog = QtConversationSettingsDialog(Config())
    qtbot.addWidget(dialog)
    panel = dialog.panel
    assert {"answer_format", "answer_schema"} <= set(panel.rows)
    panel.set_pending(panel.current.replace(answer_format="schema", answer_schema=UNENFORCEABLE))
    row = panel.rows["answer_schema"]
    assert "no-such-format" in row.problem.text()
    assert not panel.apply_button.isEnabled() and panel.apply() is False
    assert dialog.chosen is None and panel.pending.answer_schema == UNENFORCEABLE  # kept
    assert row.editor.value() == UNENFORCEABLE
    fixed = json.dumps(CAT)
    panel.set_pending(panel.pending.replace(answer_schema=fixed))
    assert row.problem.text() == "" and panel.apply()
    assert dialog.chosen is not None and dialog.chosen.answer_schema == fixed


def test_a_schema_file_loads_into_the_pending_settings_and_a_bad_file_says_why(
        qtbot, aloop, tmp_path):
    dialog = QtConversationSettingsDialog(Config())
    qtbot.addWidget(dialog)
    loader = dialog.schema_file
    not_text = tmp_path / "schema.bin"
    not_text.write_bytes(b"\xff\xfe{")
    task = loader.load(str(not_text))
    qtbot.waitUntil(task.done, timeout=10_000)
    assert "not UTF-8" in loader.error.text() and loader.error.isVisibleTo(dialog)
    assert dialog.panel.pending.answer_format == "text"  # nothing changed
    good = tmp_path / "cat.json"
    good.write_text(json.dumps(CAT, indent=2))
    task = loader.load(str(good))
    qtbot.waitUntil(task.done, timeout=10_000)
    assert not loader.error.isVisibleTo(dialog)
    pending = dialog.panel.pending
    assert pending.answer_format == "schema" and json.loads(pending.answer_schema) == CAT
    assert dialog.panel.apply_button.isEnabled()


def last_answer(window) -> str:
    return window.chat_view.messages[-1].shown.content


def test_answers_follow_the_conversations_answer_format(qtbot, make_window, model_config):
    # Free JSON may go on until the token limit (a cut answer is cut JSON): a question whose
    # object is short, and tokens to spare.
    window = make_window(model_config.replace(n_predict=64))
    edit_in_dialog(qtbot, window, answer_format="json")  # kept with its first answer
    send(qtbot, window, "What is 2+2? Answer as JSON.")
    chat = window.chat.conversation_id
    answer = window.chat_view.messages[-1]
    assert "token limit" not in answer.stats.text(), last_answer(window)
    assert isinstance(json.loads(last_answer(window)), dict), last_answer(window)

    edit_in_dialog(qtbot, window, answer_format="schema", answer_schema=json.dumps(CAT))
    send(qtbot, window, "Describe a cat called Tom.")
    jsonschema.validate(json.loads(last_answer(window)), CAT)
    with Store.open(default_path(), recover=False) as store:
        kept = store.conversation_settings(chat)
    assert kept["answer_format"] == "schema" and json.loads(kept["answer_schema"]) == CAT

    # A new conversation starts from the global settings: free text again.
    window.tasks.spawn(window.conversations.open(None), name="open-conversation")
    qtbot.waitUntil(lambda: window.chat.conversation_id is None
                    and window.config.answer_format == "text", timeout=WAIT)
    window.tasks.spawn(window.conversations.open(chat), name="open-conversation")
    qtbot.waitUntil(lambda: window.config.answer_format == "schema", timeout=WAIT)
