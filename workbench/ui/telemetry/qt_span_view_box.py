"""A plot's view box that selects a span of tokens with Shift+drag; a plain drag still pans.

It only reports x in the plot's coordinates (token indices); the panel decides what a span
means. A click without a drag asks to clear the span.
"""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal


class QtSpanViewBox(pg.ViewBox):
    span_dragged = Signal(float, float, bool)  # lo, hi (token x), finished
    clicked = Signal()

    _shift_pressed = False
    _selecting = False

    def mousePressEvent(self, ev: Any) -> None:
        # Shift at the press decides what the drag does, to its end, however the keys change.
        self._shift_pressed = bool(ev.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        ev.ignore()  # the scene still turns the press into a click or a drag

    def mouseDragEvent(self, ev: Any, axis: int | None = None) -> None:
        if ev.isStart():
            self._selecting = ev.button() == Qt.MouseButton.LeftButton and (
                self._shift_pressed or bool(ev.modifiers() & Qt.KeyboardModifier.ShiftModifier))
        if self._selecting:
            ev.accept()
            start = self.mapSceneToView(ev.buttonDownScenePos()).x()
            end = self.mapSceneToView(ev.scenePos()).x()
            self.span_dragged.emit(min(start, end), max(start, end), ev.isFinish())
            self._selecting = not ev.isFinish()
            return
        super().mouseDragEvent(ev, axis)

    def mouseClickEvent(self, ev: Any) -> None:
        if ev.button() == Qt.MouseButton.LeftButton:
            ev.accept()
            self.clicked.emit()
            return
        super().mouseClickEvent(ev)
