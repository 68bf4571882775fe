"""What differs between the arms' configurations: one row per differing key, a column per arm,
cells that differ from the first arm highlighted."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from workbench.bench.compare import MISSING, CompareTable
from workbench.ui.qt_theme import cell_tints

SAME_TEXT = "none: the arms ran the same configuration"


class QtConfigDiff(QTableWidget):
    def __init__(self) -> None:
        super().__init__()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)

    def set_table(self, table: CompareTable) -> None:
        self.clear()
        arms = table.arms
        self.setColumnCount(1 + len(arms))
        self.setHorizontalHeaderLabels(["setting", *(a.label for a in arms)])
        diffs = table.config_diff
        self.setRowCount(max(1, len(diffs)))
        if not diffs:
            self.setItem(0, 0, QTableWidgetItem(SAME_TEXT))
            return
        bold = QFont()
        bold.setBold(True)
        tints = cell_tints()
        for r, d in enumerate(diffs):
            key = QTableWidgetItem(d.key + (" (lossy)" if d.lossy else ""))
            key.setFont(bold)
            if d.lossy:
                key.setToolTip("a lossy setting: it changes what the model computes, so a "
                               "quality difference between the arms comes from it")
            self.setItem(r, 0, key)
            for c, value in enumerate(d.values):
                item = QTableWidgetItem(MISSING if value is None else value)
                if c > 0 and value != d.values[0]:
                    item.setBackground(QBrush(QColor(tints.changed)))
                    item.setForeground(QBrush(QColor(tints.text)))
                    item.setToolTip(f"{arms[0].label}: {d.values[0] or MISSING}")
                self.setItem(r, 1 + c, item)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def keys(self) -> list[str]:
        return [self.item(r, 0).text().removesuffix(" (lossy)") for r in range(self.rowCount())
                if self.item(r, 0)]

    def highlighted(self, row: int, column: int) -> bool:
        item = self.item(row, column)
        return item is not None and item.background().style() != Qt.BrushStyle.NoBrush
