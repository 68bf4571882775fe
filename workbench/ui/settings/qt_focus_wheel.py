"""Editors in the settings panel take the mouse wheel only once focused.

The panel scrolls: a wheel turned to scroll it would otherwise change whichever spin box or
combo box passes under the pointer. Qt gives these widgets focus on the wheel itself
(Qt.WheelFocus), so the focus policy is narrowed to click and Tab, and an unfocused widget
ignores the event, which Qt then hands to the parent: the scroll area scrolls on.

A mixin rather than an event filter: a filter can only eat the event, and an eaten wheel event
would not scroll the panel either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QComboBox, QWidget

# Typed as a QWidget for the checker; at run time a plain class, since a Python class may not
# derive from two Qt classes (a QWidget mixin beside QComboBox crashes Shiboken).
_Base = QWidget if TYPE_CHECKING else object


class WheelNeedsFocus(_Base):
    """Mix in before the Qt class: `class Box(WheelNeedsFocus, QComboBox)`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def wheelEvent(self, event: QWheelEvent) -> None:
        if self.hasFocus():
            super().wheelEvent(event)
        else:
            event.ignore()


class QtFocusComboBox(WheelNeedsFocus, QComboBox):
    """A combo box for a scrolling panel."""
