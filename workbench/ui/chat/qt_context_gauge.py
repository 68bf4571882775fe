"""The always-visible context gauge: tokens used of the context; warns before it is full."""

from __future__ import annotations

from PySide6.QtWidgets import QProgressBar, QWidget

WARN_AT = 0.8  # from here on the gauge is amber and says what to do before the context is full
FULL_AT = 0.95


class QtContextGauge(QProgressBar):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextGauge")
        self.setTextVisible(True)
        self.setMinimumWidth(210)
        self.setMaximumWidth(280)
        self.used = -1
        self.n_ctx = 0
        self.set_usage(-1, 0)

    @property
    def fraction(self) -> float:
        return self.used / self.n_ctx if self.n_ctx > 0 and self.used >= 0 else 0.0

    def set_usage(self, used: int, n_ctx: int) -> None:
        """`used` < 0: unknown until the next turn (e.g. right after opening a conversation)."""
        self.used, self.n_ctx = used, n_ctx
        self.setRange(0, max(1, n_ctx))
        self.setValue(max(0, min(used, n_ctx)))
        if n_ctx <= 0:
            self.setFormat("context: no model")
        elif used < 0:
            self.setFormat(f"context: ? / {n_ctx}")
        else:
            self.setFormat(f"context {used} / {n_ctx} ({self.fraction:.0%})")
        frac = self.fraction
        colour = "#c62828" if frac >= FULL_AT else "#f9a825" if frac >= WARN_AT else "#4caf50"
        self.setStyleSheet(f"QProgressBar::chunk {{ background: {colour}; }}")
        if frac >= WARN_AT:
            self.setToolTip("The context is nearly full. Start a new conversation, or reopen the "
                            "model with a larger context size, before the next answer runs out "
                            "of room.")
        else:
            self.setToolTip("Tokens the model holds for this conversation, of its context size")

    @property
    def warning(self) -> bool:
        return self.fraction >= WARN_AT
