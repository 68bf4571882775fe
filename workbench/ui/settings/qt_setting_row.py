"""One setting in the panel: label, editor, one-line hint, why it is disabled, its problems.

The editor is picked by the setting's declaration (its type and rungs, never its name), so a new
declaration in workbench/config.py appears in the panel without a line of UI code.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from workbench.config import Setting, format_value, requires_text, specials_text
from workbench.ui.qt_text_style import SMALL_PX, dim_text, tone_text
from workbench.ui.settings.qt_bool_editor import QtBoolEditor
from workbench.ui.settings.qt_choice_editor import QtChoiceEditor
from workbench.ui.settings.qt_number_editor import QtNumberEditor
from workbench.ui.settings.qt_text_editor import QtTextEditor

Editor = QtBoolEditor | QtChoiceEditor | QtNumberEditor | QtTextEditor
EDITORS: dict[str, type[Editor]] = {
    "bool": QtBoolEditor, "choice": QtChoiceEditor, "int": QtNumberEditor,
    "float": QtNumberEditor, "str": QtTextEditor,
}
LABEL_WIDTH = 160
RELOAD_NOTE = "reopens the model"


def hint_text(s: Setting) -> str:
    """The one line under the editor: what it does, its default, and whether it reopens."""
    parts = [s.help, f"default {format_value(s, s.default, unit=True)}"]
    if s.app_default is not None and s.gate is not None:
        parts[-1] += f", {_rung(s, s.app_default)} while {s.gate[0]}"
    if s.scope == "load":
        parts.append(RELOAD_NOTE)
    return " · ".join(parts)


def tooltip_text(s: Setting) -> str:
    lines = [s.help + ".", f"Default: {format_value(s, s.default, unit=True)}."]
    if s.app_default is not None and s.gate is not None:
        lines[-1] = (f"Default: {_rung(s, s.app_default)} while {s.gate[0]}, otherwise "
                     f"{format_value(s, s.default, unit=True)} (the command line's default is "
                     f"always {format_value(s, s.default, unit=True)}).")
    if specials := specials_text(s):
        lines.append(f"Special values: {specials}.")
    if s.requires or s.gate:
        lines.append(f"Only used when {requires_text(s)}.")
    lines.append("A change reopens the model." if s.scope == "load"
                 else "Applies to the next answer; the model stays open.")
    lines.append(f"CLI: {', '.join(s.flags)}")
    return "\n".join(lines)


def _rung(s: Setting, value: Any) -> str:
    """A value by its rung's label where it has one ("75 %"), else as format_value shows it."""
    return dict(s.rungs).get(value) or format_value(s, value, unit=True)


class QtSettingRow(QWidget):
    edited = Signal(str, object)  # setting name, new value (user edits only)

    def __init__(self, setting: Setting, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setting = setting
        self.label = QLabel(setting.label)
        self.label.setFixedWidth(LABEL_WIDTH)
        self.label.setWordWrap(True)  # a long label takes two lines, not a clipped one
        self.label.setToolTip(tooltip_text(setting))
        self.editor: Editor = EDITORS[setting.type](setting)
        self.editor.setToolTip(tooltip_text(setting))
        self.editor.changed.connect(lambda value: self.edited.emit(setting.name, value))
        self.hint = self._small(hint_text(setting))
        dim_text(self.hint, pixel_size=SMALL_PX)
        self.reason = self._small("")
        tone_text(self.reason, "warning", pixel_size=SMALL_PX, italic=True)
        self.problem = self._small("")
        tone_text(self.problem, "error", pixel_size=SMALL_PX)
        self.warning = self._small("")  # the setting's declared warning (Setting.warn_from)
        tone_text(self.warning, "error", pixel_size=SMALL_PX, italic=True)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.label)
        top.addWidget(self.editor, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 4)
        layout.setSpacing(1)
        layout.addLayout(top)
        for line in (self.hint, self.reason, self.warning, self.problem):
            line.setContentsMargins(LABEL_WIDTH + 6, 0, 0, 0)
            layout.addWidget(line)

    def add_line(self, widget: QWidget) -> None:
        """Another line under the editor, indented like the hint (a lossy setting's cost)."""
        widget.setContentsMargins(LABEL_WIDTH + 6, 0, 0, 0)
        self.layout().addWidget(widget)

    @staticmethod
    def _small(text: str) -> QLabel:
        label = QLabel(text)
        label.setWordWrap(True)
        label.setVisible(bool(text))
        return label

    def set_value(self, value: Any) -> None:
        self.editor.set_value(value)

    def set_inactive(self, reason: str) -> None:
        """Disable the editor and say why ("" enables it)."""
        self.editor.setEnabled(not reason)
        self.label.setEnabled(not reason)
        self.reason.setText(reason)
        self.reason.setVisible(bool(reason))

    def set_warning(self, text: str) -> None:
        self.warning.setText(text)
        self.warning.setVisible(bool(text))

    def set_problems(self, messages: list[str]) -> None:
        self.problem.setText("\n".join(messages))
        self.problem.setVisible(bool(messages))

    @property
    def active(self) -> bool:
        return self.editor.isEnabled()
