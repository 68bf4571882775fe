"""The model picker's offer for a model that will not fit in memory: stream its experts with the
cache `workbench advise` would choose (bench/advise.py's plan, from the header and the memory
available now; the routing probe's hit rate is the command's, too slow for a dialog)."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QVBoxLayout, QWidget

from workbench.bench.advise import Advice, Machine, layout_of, plan, this_machine
from workbench.moe.layout import ModelFacts
from workbench.ui.qt_plain_label import plain_label
from workbench.ui.qt_text_style import SMALL_PX, dim_text


class QtFitOffer(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.advice: Advice | None = None
        self.note = plain_label()
        self.note.setWordWrap(True)
        dim_text(self.note, pixel_size=SMALL_PX)
        self.use = QCheckBox()
        self.use.setToolTip("`workbench advise MODEL` prints the same, with the hit rate a "
                            "short routing probe expects")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.use)
        layout.addWidget(self.note)
        self.setVisible(False)

    def update_for(self, facts: ModelFacts, kv_mib: float, available_mib: float) -> None:
        """Offer streaming when the plan says stream; say so when it cannot fit at all."""
        machine = this_machine()
        advice = plan(layout_of(facts), Machine(available_mib, machine.total_mib, machine.cores),
                      kv_mib)
        self.advice = advice
        if advice.verdict == "stream":
            cache = f"a {advice.cache_mb} MiB expert cache" if advice.cache_mb else "no cache"
            self.use.setText(f"Stream its experts from disk, with {cache} (recommended)")
            self.use.setChecked(True)
            self.use.setVisible(True)
            self.note.setText(" ".join(advice.reasons[:2]))
        elif advice.verdict == "does not fit":
            self.use.setChecked(False)
            self.use.setVisible(False)
            self.note.setText(advice.reasons[0])
        else:
            self.use.setChecked(False)
            self.setVisible(False)
            return
        self.setVisible(True)

    def settings(self) -> dict[str, object]:
        """What to apply to the config: the plan's streaming settings when offered and taken
        (no thread count: the picker's own field, measured at open unless edited)."""
        if self.advice is None or not self.advice.stream or not self.use.isChecked():
            return {}
        return dict(self.advice.settings)
