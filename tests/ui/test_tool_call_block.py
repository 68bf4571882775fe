"""A tool call's block in the chat: its name and pretty-printed arguments, folding, a pasted
result, and a local command that runs only after the user confirms its exact command line (in a
QProcess, under a time limit), its output the result."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QMessageBox

from workbench.engine.tools.calls import ToolCall
from workbench.ui.chat.qt_tool_call_block import QtToolCallBlock

CALL = ToolCall("get_weather", '{"city": "Oslo"}', id="call_1")
WAIT = 20_000


def writes(marker) -> tuple[str, ...]:
    """A command whose side effect is a file, and whose output is its arguments."""
    script = ("import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran'); "
              "print('weather for', sys.argv[2])")
    return (sys.executable, "-c", script, str(marker))


def results(block) -> list[tuple[str, str]]:
    got: list[tuple[str, str]] = []
    block.result_ready.connect(lambda call_id, text: got.append((call_id, text)))
    return got


def test_the_block_shows_the_call_and_folds(qtbot):
    block = QtToolCallBlock(CALL)
    qtbot.addWidget(block)
    block.show()
    assert "get_weather" in block.toggle.text()
    assert block.arguments.text() == '{\n  "city": "Oslo"\n}'
    assert not block.run_button.isVisible()  # no command: the user pastes the result
    assert block.body.isVisible()
    block.toggle.click()
    assert not block.expanded and not block.body.isVisible()
    block.toggle.click()
    assert block.body.isVisible()


def test_a_pasted_result_is_sent_once(qtbot):
    block = QtToolCallBlock(CALL)
    qtbot.addWidget(block)
    got = results(block)
    block.result.setPlainText("12 °C, rain")
    block.send_button.click()
    block.send_button.click()
    assert got == [("call_1", "12 °C, rain")]
    assert block.result.isReadOnly() and "answered" in block.toggle.text()


def test_declining_the_confirmation_runs_nothing(qtbot, tmp_path):
    marker = tmp_path / "side-effect"
    block = QtToolCallBlock(CALL, writes(marker))
    qtbot.addWidget(block)
    block.show()
    block.run_button.click()
    box = block.confirm
    assert isinstance(box, QMessageBox) and box.isVisible()
    assert str(marker) in box.informativeText() and '{"city": "Oslo"}' in box.informativeText()
    box.button(QMessageBox.StandardButton.No).click()
    qtbot.waitUntil(lambda: block.confirm is None, timeout=WAIT)
    assert block.process is None and not marker.exists()


def test_accepting_runs_the_command_and_its_output_is_the_result(qtbot, tmp_path):
    marker = tmp_path / "side-effect"
    block = QtToolCallBlock(CALL, writes(marker))
    qtbot.addWidget(block)
    got = results(block)
    block.show()
    block.run_button.click()
    block.confirm.button(QMessageBox.StandardButton.Yes).click()
    qtbot.waitUntil(lambda: "weather for" in block.result.toPlainText(), timeout=WAIT)
    assert marker.read_text() == "ran"
    assert block.result.toPlainText().strip() == 'weather for {"city": "Oslo"}'
    assert got == []  # the user reads it first
    block.send_button.click()
    assert got == [("call_1", block.result.toPlainText())]


def test_a_command_past_its_time_limit_is_stopped_and_one_that_cannot_start_says_so(qtbot):
    slow = QtToolCallBlock(CALL, (sys.executable, "-c", "import time; time.sleep(30)"),
                           timeout_ms=300)
    qtbot.addWidget(slow)
    slow.run()
    qtbot.waitUntil(lambda: "did not finish" in slow.status.text(), timeout=WAIT)
    missing = QtToolCallBlock(CALL, ("/no/such/tool-command",))
    qtbot.addWidget(missing)
    missing.run()
    qtbot.waitUntil(lambda: "could not start" in missing.status.text(), timeout=WAIT)
    assert missing.send_button.isEnabled()
