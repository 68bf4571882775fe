"""One owner for the session in force (issue 27): the settings in force, the model and each
conversation's own settings live in ui/session_controller.py; the window and the chat
controller ask it instead of keeping copies that must be synced by hand."""

from __future__ import annotations

import ast
from pathlib import Path

import workbench

UI = Path(workbench.__file__).parent / "ui"
OWNER = UI / "session_controller.py"
# The session's figures: a copy of them anywhere else is a second truth.
OWNED = {"config", "global_config", "model", "loading"}


def _modules() -> list[Path]:
    return sorted(UI.rglob("*.py"))


def test_a_conversations_settings_are_written_from_one_place():
    writers = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr == "set_conversation_settings"
                    and isinstance(node.ctx, ast.Load)):
                writers.append(path.relative_to(UI).as_posix())
    assert writers == ["session_controller.py"]


def test_the_window_and_the_chat_keep_no_copy_of_the_settings_in_force():
    for name in ("qt_main_window.py", "chat/controller.py"):
        tree = ast.parse((UI / name).read_text(encoding="utf-8"))
        copies = [f"{name}:{node.lineno} self.{target.attr}"
                  for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign))
                  for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                  if isinstance(target, ast.Attribute) and target.attr in OWNED
                  and isinstance(target.value, ast.Name) and target.value.id == "self"]
        assert copies == [], copies


def test_the_owner_is_qt_free():
    imported = {alias.name.split(".")[0]
                for node in ast.walk(ast.parse(OWNER.read_text(encoding="utf-8")))
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in (node.names if isinstance(node, ast.Import)
                              else [ast.alias(node.module or "")])}
    assert not imported & {"PySide6", "pyqtgraph", "qasync"}
