"""A layout that places its items left to right and wraps them onto new lines when narrow.

A row of controls in a QHBoxLayout asks for the sum of its widths as its minimum, and a row
like the composer's or the expert map's legend then sets the whole window's minimum width
(past a 1280 px screen). Here the minimum is the widest single item, and a narrow row grows a
line instead (a height for its width, which box layouts and scroll areas honour).

`add_stretch()` is a gap that takes the leftover width of its line, as a box layout's stretch
does; a line after it with no stretch of its own is right-aligned, so the controls that were
pushed to the right stay on the right when they wrap.
"""

from __future__ import annotations

import math
from functools import lru_cache

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QFont, QTextDocument
from PySide6.QtGui import Qt as QtGuiNamespace  # mightBeRichText lives here
from PySide6.QtWidgets import QLabel, QLayout, QLayoutItem, QSizePolicy, QSpacerItem, QWidget

_Placed = tuple[QLayoutItem, int, int]  # item, width, height (a stretch: 0, 0)


class QtFlowLayout(QLayout):
    def __init__(self, parent: QWidget | None = None, h_spacing: int = 6,
                 v_spacing: int = 2) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._h, self._v = h_spacing, v_spacing
        self._hfw: tuple[int, int] | None = None  # (width, height): asked for many times
        self.setContentsMargins(0, 0, 0, 0)

    # ---- QLayout ------------------------------------------------------------------------------

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)
        self.invalidate()

    def add_stretch(self) -> None:
        self.addItem(QSpacerItem(0, 0, QSizePolicy.Policy.Expanding,
                                 QSizePolicy.Policy.Minimum))

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        if not 0 <= index < len(self._items):
            return None
        item = self._items.pop(index)
        self.invalidate()
        return item

    def invalidate(self) -> None:
        self._hfw = None
        super().invalidate()

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        if self._hfw is None or self._hfw[0] != width:
            self._hfw = (width, self._arrange(QRect(0, 0, width, 0), apply=False))
        return self._hfw[1]

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, apply=True)

    def sizeHint(self) -> QSize:
        """Everything on one line."""
        shown = self._shown()
        width = sum(item.sizeHint().width() for item in shown) + self._h * max(0, len(shown) - 1)
        height = max((item.sizeHint().height() for item in shown), default=0)
        return self._with_margins(width, height)

    def minimumSize(self) -> QSize:
        """The widest item: anything narrower wraps."""
        shown = self._shown()
        width = max((item.minimumSize().width() for item in shown), default=0)
        height = max((item.minimumSize().height() for item in shown), default=0)
        return self._with_margins(width, height)

    # ---- arranging ----------------------------------------------------------------------------

    def _shown(self) -> list[QLayoutItem]:
        return [item for item in self._items if not item.isEmpty()]

    def _with_margins(self, width: int, height: int) -> QSize:
        m = self.contentsMargins()
        return QSize(width + m.left() + m.right(), height + m.top() + m.bottom())

    def _lines(self, width: int) -> list[list[_Placed]]:
        lines: list[list[_Placed]] = [[]]
        used = 0
        for item in self._items:
            if item.spacerItem() is not None:
                lines[-1].append((item, 0, 0))
                continue
            if item.isEmpty():  # a hidden widget
                continue
            hint, low, high = _hint(item), item.minimumSize(), item.maximumSize()
            w = max(low.width(), min(hint.width(), high.width(), width))
            h = item.heightForWidth(w) if item.hasHeightForWidth() else hint.height()
            filled = any(placed.spacerItem() is None for placed, _, _ in lines[-1])
            if filled and used + self._h + w > width:
                lines.append([])
                filled = False
            used = used + self._h + w if filled else w
            lines[-1].append((item, w, h))
        return lines

    def _arrange(self, rect: QRect, apply: bool) -> int:
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        y = area.y()
        after_stretch = False
        for line in self._lines(max(1, area.width())):
            widgets = [(item, w, h) for item, w, h in line if item.spacerItem() is None]
            stretches = len(line) - len(widgets)
            if not widgets:
                after_stretch = after_stretch or stretches > 0
                continue
            if y > area.y():
                y += self._v
            height = max(h for _, _, h in widgets)
            if apply:
                used = sum(w for _, w, _ in widgets) + self._h * (len(widgets) - 1)
                spare = max(0, area.width() - used)
                x = area.x() + (spare if after_stretch and not stretches else 0)
                gap = spare // stretches if stretches else 0
                first = True
                for item, w, h in line:
                    if item.spacerItem() is not None:
                        x += gap
                        continue
                    if not first:
                        x += self._h
                    item.setGeometry(QRect(x, y + (height - h) // 2, w, h))
                    x += w
                    first = False
            after_stretch = after_stretch or stretches > 0
            y += height
        return y - area.y() + m.top() + m.bottom()


def _hint(item: QLayoutItem) -> QSize:
    """The item's size hint; for a word-wrapped label its text on one line. (QLabel's own hint
    for one is a guess at a pleasing shape, often two lines where one would fit.)"""
    hint = item.sizeHint()
    label = item.widget()
    if not isinstance(label, QLabel) or not label.wordWrap():
        return hint
    text = label.text()
    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and QtGuiNamespace.mightBeRichText(text))
    m = label.contentsMargins()
    extra = m.left() + m.right() + 2 * label.margin() + max(0, label.indent())
    return QSize(_one_line_width(text, rich, label.font().toString()) + extra, hint.height())


@lru_cache(maxsize=256)
def _one_line_width(text: str, rich: bool, font: str) -> int:
    """Laid out as QLabel lays it out (a text document), so the width is exactly one line."""
    doc = QTextDocument()
    qfont = QFont()
    qfont.fromString(font)
    doc.setDefaultFont(qfont)
    doc.setDocumentMargin(0)
    if rich:
        doc.setHtml(text)
    else:
        doc.setPlainText(text)
    return math.ceil(doc.idealWidth()) + 1
