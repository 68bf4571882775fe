"""The compare table: each figure per arm with its 95 % interval, and its ratio to the first arm
(green or red when the interval excludes 1, by whether the figure is better higher or lower)."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from workbench.bench.compare import CompareTable, Row, format_interval
from workbench.bench.stats import Interval
from workbench.ui.qt_theme import cell_tints


def ratio_text(iv: Interval | None) -> str:
    """ "×1.08 [1.02, 1.15] *": the star marks an interval that excludes 1."""
    text = format_interval(iv, "×", digits=3)
    return text + " *" if significant(iv) else text


def significant(iv: Interval | None) -> bool:
    return iv is not None and math.isfinite(iv.low) and iv.excludes(1.0)


def verdict(row: Row, iv: Interval | None) -> int:
    """+1 better than the first arm, -1 worse, 0 no clear difference."""
    if iv is None or not significant(iv):
        return 0
    higher = iv.estimate > 1.0
    return 1 if higher == (row.figure.better == "higher") else -1


class QtSummaryTable(QTableWidget):
    def __init__(self) -> None:
        super().__init__()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setVisible(False)
        self.table: CompareTable | None = None

    def set_table(self, table: CompareTable) -> None:
        self.table = table
        arms = table.arms
        headers = ["figure", "unit", arms[0].label]
        for arm in arms[1:]:
            headers += [arm.label, f"{arm.label} / {arms[0].label}"]
        self.clear()
        self.setColumnCount(len(headers))
        self.setRowCount(len(table.rows))
        self.setHorizontalHeaderLabels(headers)
        for c, arm in enumerate(arms):
            column = 2 if c == 0 else 1 + 2 * c
            self.horizontalHeaderItem(column).setToolTip(
                f"{arm.label}: {len(arm.runs)} run(s), {arm.n_tokens} decode tokens")
        tints = cell_tints()
        for r, row in enumerate(table.rows):
            self._put(r, 0, row.figure.label)
            self._put(r, 1, row.figure.unit)
            self._put(r, 2, format_interval(row.cells[0].value))
            for c, cell in enumerate(row.cells[1:], start=1):
                self._put(r, 1 + 2 * c, format_interval(cell.value))
                item = self._put(r, 2 + 2 * c, ratio_text(cell.ratio))
                tone = verdict(row, cell.ratio)
                if tone:
                    item.setBackground(QBrush(QColor(tints.better if tone > 0 else tints.worse)))
                    item.setForeground(QBrush(QColor(tints.text)))
                    item.setToolTip("better than " if tone > 0 else "worse than "
                                    f"{arms[0].label}; the interval excludes 1")
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def _put(self, row: int, column: int, text: str) -> QTableWidgetItem:
        item = QTableWidgetItem(text)
        if column >= 2:
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.setItem(row, column, item)
        return item

    def text_at(self, figure_key: str, column: int) -> str:
        assert self.table is not None
        keys = [row.figure.key for row in self.table.rows]
        item = self.item(keys.index(figure_key), column)
        return item.text() if item is not None else ""
