"""The runs list's table: one row per RunEntry, sortable by any column."""

from __future__ import annotations

import math
import time
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from workbench.bench.compare import format_interval
from workbench.bench.figures import FIGURE_BY_KEY
from workbench.bench.quality_cost import NOT_SCORED
from workbench.bench.stats import Interval
from workbench.engine.summary_labels import RATE, TTFT
from workbench.runs.entries import RunEntry

MISSING = "—"
COLUMNS: tuple[tuple[str, str], ...] = (
    ("label", "Run"), ("created_at", "When"), ("model", "Model"), ("kind", "Kind"),
    # The summary figures are called what every view calls them (engine/summary_labels.py);
    # the reads per token are the compare table's figure (bench/figures.py).
    ("n_tokens", "Tokens"), ("tok_s", RATE.unit), ("ttft_s", TTFT.heading),
    ("read_mib", FIGURE_BY_KEY["read_mib"].unit),
    # A scored run's quality (bench/quality_cost.py), with its 95 % interval; "—" otherwise.
    ("ppl", "Perplexity"), ("kl_mean", "KL nats"), ("agreement_pct", "Agree %"),
)
QUALITY_KEYS = ("ppl", "kl_mean", "agreement_pct")
_NUMERIC = ("n_tokens", "tok_s", "ttft_s", "read_mib", *QUALITY_KEYS)


def quality_interval(entry: RunEntry, key: str) -> Interval:
    return getattr(entry.cost, key) if entry.cost is not None else NOT_SCORED
_Index = QModelIndex | QPersistentModelIndex


def cell_text(entry: RunEntry, key: str) -> str:
    if key in QUALITY_KEYS:
        return format_interval(quality_interval(entry, key), digits=3)
    value = getattr(entry, key)
    if key == "created_at":
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(value))
    if isinstance(value, float):
        return MISSING if math.isnan(value) else f"{value:.2f}"
    return str(value)


def sort_key(entry: RunEntry, key: str) -> Any:
    value = quality_interval(entry, key).estimate if key in QUALITY_KEYS else getattr(entry, key)
    if isinstance(value, float) and math.isnan(value):
        return (1, 0.0)  # unmeasured sorts last either way round
    return (0, value)


class RunsTableModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.entries: list[RunEntry] = []

    def set_entries(self, entries: list[RunEntry]) -> None:
        self.beginResetModel()
        self.entries = list(entries)
        self.endResetModel()

    def entry(self, row: int) -> RunEntry:
        return self.entries[row]

    def row_of(self, key: str) -> int:
        return next((i for i, e in enumerate(self.entries) if e.key == key), -1)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.entries)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        entry, key = self.entries[index.row()], COLUMNS[index.column()][0]
        if role == Qt.ItemDataRole.DisplayRole:
            return cell_text(entry, key)
        if role == Qt.ItemDataRole.ToolTipRole:
            if key in QUALITY_KEYS and entry.cost is not None:
                return entry.cost.detail()
            return entry.path or f"stored run {entry.run_id}"
        if role == Qt.ItemDataRole.TextAlignmentRole and key in _NUMERIC:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return entry.key
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section][1]
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        key = COLUMNS[column][0]
        self.beginResetModel()
        self.entries.sort(key=lambda e: sort_key(e, key),
                          reverse=order == Qt.SortOrder.DescendingOrder)
        self.endResetModel()
