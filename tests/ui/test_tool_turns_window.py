"""Tools in a window conversation (issue #36), on the real model: a tools file loaded in the
conversation settings, an answer's call shown as its own block, a pasted result stored as a
'tool' message that the model goes on from, the same blocks and the same model history after
the conversation is reopened; a declined command runs nothing (slow: gemma-3-270m).

`tool_choice: required` makes the path deterministic: the answer is a call from its first token
(the model's template shows no tools: the generic format, whose grammar holds the whole answer
to `{"tool_calls": [...]}`), and so is the answer that goes on from its result."""

from __future__ import annotations

import json
import sys

from PySide6.QtWidgets import QMessageBox

from tests.ui.user_actions import WAIT, send
from workbench.config import Config
from workbench.store import Store, default_path
from workbench.ui.chat.context import model_history
from workbench.ui.chat.qt_conversation_header import QtConversationSettingsDialog

# Bounded arguments (an enum): every call closes within the tokens it may take.
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "required": ["city"], "additionalProperties": False,
                   "properties": {"city": {"enum": ["Oslo", "Paris"]}}}}}


def load_tools(qtbot, window, tools_path, **changes) -> None:
    """The conversation settings dialog: Load tools file…, then Apply with `changes`."""
    task = window.tasks.spawn(window.edit_conversation_settings())
    qtbot.waitUntil(lambda: window.findChild(QtConversationSettingsDialog) is not None
                    and window.findChild(QtConversationSettingsDialog).isVisible(), timeout=WAIT)
    dialog = window.findChild(QtConversationSettingsDialog)
    loading = dialog.tools_file.load(str(tools_path))
    qtbot.waitUntil(loading.done, timeout=WAIT)
    assert not dialog.tools_file.error.isVisibleTo(dialog), dialog.tools_file.error.text()
    dialog.panel.set_pending(dialog.panel.pending.replace(**changes))
    dialog.panel.apply_button.click()
    qtbot.waitUntil(task.done, timeout=WAIT)
    assert task.result() is True


def test_a_tools_file_loads_into_the_pending_settings_and_a_bad_one_changes_nothing(
        qtbot, aloop, tmp_path):
    dialog = QtConversationSettingsDialog(Config())
    qtbot.addWidget(dialog)
    loader = dialog.tools_file
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"type": "function", "function": {"name": "no spaces"}}]))
    task = loader.load(str(bad))
    qtbot.waitUntil(task.done, timeout=10_000)
    assert "tools[0].function.name" in loader.error.text() and loader.error.isVisibleTo(dialog)
    assert dialog.panel.pending.tools == ""  # nothing changed
    good = tmp_path / "tools.json"
    good.write_text(json.dumps({"tools": [WEATHER]}, indent=2))
    task = loader.load(str(good))
    qtbot.waitUntil(task.done, timeout=10_000)
    assert not loader.error.isVisibleTo(dialog)
    assert json.loads(dialog.panel.pending.tools) == [WEATHER]
    assert dialog.panel.apply_button.isEnabled()


def call_blocks(window) -> list:
    return [b for w in window.chat_view.messages for b in w.tool_blocks]


def test_a_call_is_a_block_its_pasted_result_a_turn_and_both_survive_a_reopen(
        qtbot, make_window, model_config, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER]))
    window = make_window(model_config.replace(n_predict=96))
    load_tools(qtbot, window, tools, tool_choice="required")
    send(qtbot, window, "What is the weather in Oslo?")
    chat = window.chat.conversation_id
    [block] = call_blocks(window)
    assert block.call.name == "get_weather" and json.loads(block.call.arguments)["city"] in (
        "Oslo", "Paris")
    assert block.send_button.isEnabled() and not block.done

    done = window.chat.turns_done
    block.result.setPlainText("12 °C, rain")
    block.send_button.click()
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)
    with Store.open(default_path(), recover=False) as store:
        path = store.active_path(chat)
        kept = store.conversation_settings(chat)
    assert [m.role for m in path] == ["user", "assistant", "tool", "assistant"]
    assert path[1].tool_calls and path[1].content == ""
    assert (path[2].content, path[2].tool_call_id, path[2].tool_name) == (
        "12 °C, rain", block.call.id, "get_weather")
    assert path[3].status == "complete" and path[3].parent_id == path[2].id
    assert path[3].tool_calls  # still required: the model went on with another call
    assert json.loads(kept["tools"]) == [WEATHER] and kept["tool_choice"] == "required"
    before = model_history(window.chat.path, window.chat.images)
    assert [m["role"] for m in before] == ["user", "assistant", "tool"]  # the last call waits

    # Reopened from the store: the same blocks, the first with its result; the same history.
    window.tasks.spawn(window.conversations.open(None), name="open-conversation")
    qtbot.waitUntil(lambda: window.chat.conversation_id is None, timeout=WAIT)
    window.tasks.spawn(window.conversations.open(chat), name="open-conversation")
    qtbot.waitUntil(lambda: window.chat.conversation_id == chat
                    and len(call_blocks(window)) == 2, timeout=WAIT)
    first, last = call_blocks(window)
    assert first.done and first.result.toPlainText() == "12 °C, rain"
    assert not last.done and last.send_button.isEnabled()  # the one the conversation waits on
    assert len(window.chat_view.messages) == 3  # the result is in its block, not a message
    assert model_history(window.chat.path, window.chat.images) == before


def test_declining_a_tools_command_runs_nothing_and_sends_nothing(
        qtbot, make_window, model_config, tmp_path):
    marker = tmp_path / "side-effect"
    script = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')"
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{**WEATHER, "x-workbench-command": [
        sys.executable, "-c", script, str(marker)]}]))
    window = make_window(model_config.replace(n_predict=96))
    load_tools(qtbot, window, tools, tool_choice="required")
    send(qtbot, window, "What is the weather in Paris?")
    [block] = call_blocks(window)
    assert block.run_button.isVisible() and block.run_button.isEnabled()
    block.run_button.click()
    box = block.confirm
    assert isinstance(box, QMessageBox) and str(marker) in box.informativeText()
    box.button(QMessageBox.StandardButton.No).click()
    qtbot.waitUntil(lambda: block.confirm is None, timeout=WAIT)
    assert block.process is None and not marker.exists()
    assert not block.done and [m.role for m in window.chat.path] == ["user", "assistant"]
