"""The status bar: model, engine state, tok/s, context; a progress bar and Cancel while loading.

The model's line shortens itself ("…", the whole of it in the tooltip) rather than widen the
window: it holds a file name of any length. The rest have bounded widths.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QProgressBar, QPushButton, QStatusBar, QWidget

from workbench.engine.summary_labels import RATE
from workbench.ui.qt_elided_label import QtElidedLabel
from workbench.ui.qt_stable_label import QtStableLabel

STATES = ("no model", "loading", "prefill", "generating", "stopping", "idle", "error")


class QtStatusBar(QStatusBar):
    cancel_load_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_label = QtElidedLabel("no model")
        self.state_label = QtStableLabel("no model")
        self.state_label.setObjectName("engineState")
        self.rate_label = QtStableLabel(rate_text(-1.0))
        self.context_label = QtStableLabel("context –")
        self.load_bar = QProgressBar()
        self.load_bar.setRange(0, 100)
        self.load_bar.setMaximumWidth(160)
        self.load_bar.setVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop loading the model")
        self.cancel_button.setVisible(False)
        self.cancel_button.clicked.connect(self.cancel_load_requested)
        self.addWidget(self.model_label, 1)
        for w in (self.load_bar, self.cancel_button, self.state_label, self.rate_label,
                  self.context_label):
            self.addPermanentWidget(w)
        self.state = "no model"

    def set_model(self, text: str) -> None:
        self.model_label.setText(text)

    def set_state(self, state: str, detail: str = "") -> None:
        self.state = state
        self.state_label.setText(f"{state} {detail}".strip())

    def set_rate(self, tok_s: float) -> None:
        self.rate_label.setText(rate_text(tok_s))

    def set_context(self, used: int, n_ctx: int) -> None:
        if n_ctx <= 0:
            self.context_label.setText("context –")
        elif used < 0:
            self.context_label.setText(f"context ? / {n_ctx}")
        else:
            self.context_label.setText(f"context {used} / {n_ctx}")

    def set_loading(self, fraction: float | None) -> None:
        """None hides the progress bar; a fraction shows it with Cancel."""
        loading = fraction is not None
        self.load_bar.setVisible(loading)
        self.cancel_button.setVisible(loading)
        if loading:
            self.load_bar.setValue(int(fraction * 100))


def rate_text(tok_s: float) -> str:
    """The last answer's decode rate in the summary table's unit ("–" when unmeasured)."""
    return f"– {RATE.unit}" if tok_s < 0 else f"{tok_s:.1f} {RATE.unit}"
