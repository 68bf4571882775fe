"""The short list of an answer's slow tokens under it: "token 41: 83 ms, 9 experts read from
disk (23 MiB)"; a click on one selects that token (on the plots and in the token view).

Tokens are numbered as the plots' hover readout numbers them (their x across the
conversation), so the list and the readout name the same token alike."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QWidget

from workbench.bench.stalls import WINDOW_LIST, Explanation
from workbench.ui.qt_text_style import SMALL_PX, dim_text
from workbench.ui.stalls.noteworthy import noteworthy


class QtStallList(QLabel):
    token_clicked = Signal(int)  # the token's index in the answer (0-based)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("stall_list")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByMouse)
        dim_text(self, pixel_size=SMALL_PX)
        self.linkActivated.connect(self._link)
        self.lines: list[str] = []  # the plain text of each entry (tests, copy)
        self.indices: list[int] = []
        self.more = 0  # noteworthy slow tokens past the list
        self.setVisible(False)

    def show_explanation(self, e: Explanation, x0: int = 0, limit: int = WINDOW_LIST) -> None:
        """`x0`: the answer's first token's x on the plots (the numbers shown)."""
        chosen = noteworthy(e, limit)
        worst = chosen.listed
        self.lines = [t.line(e.median_ms, number=x0 + t.index) for t in worst]
        self.indices = [t.index for t in worst]
        self.more = chosen.more
        if not worst:
            self.clear()
            self.setVisible(False)
            return
        head = f"Slow tokens (≥ {e.threshold_ms:.1f} ms, {e.median_ms:.1f} ms median):"
        items = [f'<a href="stall:{i}">{html.escape(line)}</a>'
                 for i, line in zip(self.indices, self.lines, strict=True)]
        if self.more:
            items.append(html.escape(f"… and {self.more} more, not marked on the plots "
                                     "(`workbench explain` lists them all)"))
        self.setText(f"{html.escape(head)}<br>" + "<br>".join(items))
        self.setToolTip("Click a token to find it on the plots and in the answer; "
                        "`workbench explain` lists them all")
        self.setVisible(True)

    def _link(self, link: str) -> None:
        if link.startswith("stall:"):
            self.token_clicked.emit(int(link[6:]))
