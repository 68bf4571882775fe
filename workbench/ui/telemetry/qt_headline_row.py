"""The row of headline numbers above the plots (refreshed by its own slow timer).

A flow: in a narrow dock the numbers wrap onto a second line instead of widening the window.
"""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from workbench.ui.qt_flow_layout import QtFlowLayout
from workbench.ui.qt_stable_label import QtStableLabel
from workbench.ui.qt_text_style import SMALL_PX, dim_text
from workbench.ui.telemetry.headline import Headline


class QtHeadlineRow(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QtFlowLayout(self, h_spacing=0)
        layout.setContentsMargins(6, 2, 6, 2)
        self.names: dict[str, QLabel] = {}
        self.values: dict[str, QLabel] = {}
        for label, text in Headline().items():
            name = QLabel(label)
            dim_text(name, pixel_size=SMALL_PX)
            value = QtStableLabel(text)
            value.setStyleSheet("font-size: 15px; font-weight: bold;")
            value.setObjectName(f"headline_{label}")
            box = QWidget()
            col = QHBoxLayout(box)
            col.setContentsMargins(0, 0, 12, 0)
            col.addWidget(name)
            col.addWidget(value)
            layout.addWidget(box)
            self.names[label] = name
            self.values[label] = value

    def show_headline(self, headline: Headline) -> None:
        for label, text in headline.items():
            widget = self.values[label]
            if widget.text() != text:
                widget.setText(text)
