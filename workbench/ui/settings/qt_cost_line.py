"""A lossy setting's measured cost, under its row in the settings panel: "Measured: KL 0.031,
ppl +2.4 %, 1.9x faster", or "Not measured" with a Price it button that scores the pending
settings in the background (progress and Stop while it runs). The panel decides what it shows;
the settings page runs the pricing (qt_settings_page.py)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from workbench.ui.qt_text_style import SMALL_PX, dim_text

UNMEASURED_TEXT = "Not measured on this model"
PRICE_TIP = ("Score these settings against the lossless reference on the bundled text, in the "
             "background (workbench score): KL, perplexity and agreement, and the speed they buy")


class QtCostLine(QWidget):
    price_clicked = Signal()
    stop_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text = QLabel()
        self.text.setWordWrap(True)
        dim_text(self.text, pixel_size=SMALL_PX)
        self.price_button = QPushButton("Price it")
        self.price_button.setToolTip(PRICE_TIP)
        self.price_button.clicked.connect(self.price_clicked)
        self.progress = QProgressBar()
        self.progress.setMaximumHeight(14)
        self.progress.setTextVisible(True)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop pricing; nothing is recorded")
        self.stop_button.clicked.connect(self.stop_clicked)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.text, 1)
        row.addWidget(self.progress, 1)
        row.addWidget(self.price_button)
        row.addWidget(self.stop_button)
        self.show_hidden()

    def _parts(self, *, progress: bool, price: bool) -> None:
        self.progress.setVisible(progress)
        self.stop_button.setVisible(progress)
        self.price_button.setVisible(price)

    def show_hidden(self) -> None:
        self.setVisible(False)

    def show_measured(self, summary: str, tooltip: str) -> None:
        self.text.setText(f"Measured: {summary}")
        self.text.setToolTip(tooltip)
        self.price_button.setText("Price again")
        self._parts(progress=False, price=True)
        self.setVisible(True)

    def show_unmeasured(self, note: str = "") -> None:
        self.text.setText(UNMEASURED_TEXT + (f" ({note})" if note else ""))
        self.text.setToolTip("")
        self.price_button.setText("Price it")
        self._parts(progress=False, price=True)
        self.setVisible(True)

    def show_progress(self, phase: str, done: int, total: int) -> None:
        self.text.setText(f"Pricing: {phase} read")
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.progress.setFormat(f"{phase} %v/%m")
        self._parts(progress=True, price=False)
        self.setVisible(True)

    def set_price_enabled(self, enabled: bool, why: str = "") -> None:
        self.price_button.setEnabled(enabled)
        self.price_button.setToolTip(PRICE_TIP if enabled else why)

    @property
    def pricing(self) -> bool:
        return self.stop_button.isVisibleTo(self)
