"""The runs list: filters (model, dates, kind), the table, and its actions. It only shows and
asks; QtRunsPage does the work and calls `set_entries` / `set_models` with what it found."""

from __future__ import annotations

from PySide6.QtCore import QDate, QDateTime, QItemSelectionModel, QTime, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from workbench.runs.entries import KINDS, RunEntry, RunFilters
from workbench.ui.qt_flow_layout import QtFlowLayout
from workbench.ui.runs.qt_runs_table_model import RunsTableModel

ALL_MODELS = "All models"


class QtRunsList(QWidget):
    filters_changed = Signal()
    import_requested = Signal()
    export_requested = Signal(str)  # the entry key
    compare_requested = Signal(list)  # entry keys, in list order
    matrix_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model_filter = QComboBox()
        self.model_filter.addItem(ALL_MODELS, "")
        self.kind_filter = QComboBox()
        for kind in KINDS:
            self.kind_filter.addItem(kind.capitalize(), kind)
        self.use_since, self.since = self._date("From", QDate.currentDate().addDays(-7))
        self.use_until, self.until = self._date("To", QDate.currentDate())
        for combo in (self.model_filter, self.kind_filter):
            combo.currentIndexChanged.connect(lambda _: self.filters_changed.emit())
        for edit in (self.since, self.until):
            edit.dateChanged.connect(lambda _: self.filters_changed.emit())
        for box in (self.use_since, self.use_until):
            box.toggled.connect(lambda _: self._dates_toggled())
        self.model = RunsTableModel()
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)
        self.count = QLabel()
        self.import_button = QPushButton("Import CSV…")
        self.import_button.setToolTip("Add metrics files (ours, or upstream bmoe_metrics v1/v2)")
        self.import_button.clicked.connect(self.import_requested)
        self.export_button = QPushButton("Export CSV…")
        self.export_button.setToolTip("Write the selected run as a metrics CSV")
        self.export_button.clicked.connect(self._export)
        self.compare_button = QPushButton("Compare")
        self.compare_button.setToolTip("Compare the selected runs (two or more)")
        self.compare_button.clicked.connect(
            lambda: self.compare_requested.emit(self.selected_keys()))
        self.matrix_button = QPushButton("Bench matrix…")
        self.matrix_button.setToolTip("Run presets over a prompt set and compare them")
        self.matrix_button.clicked.connect(self.matrix_requested)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._enable())
        self.model.modelReset.connect(self._enable)

        # Flows: in rows the filters and the actions asked for 507 px, more than a dock
        # beside the chat has on a small screen; narrow, they wrap.
        filters = QtFlowLayout()
        filters.addWidget(self.model_filter)
        filters.addWidget(self.kind_filter)
        for box, edit in ((self.use_since, self.since), (self.use_until, self.until)):
            pair = QWidget()  # a date stays beside its check box when the row wraps
            row = QHBoxLayout(pair)
            row.setContentsMargins(0, 0, 0, 0)
            row.addWidget(box)
            row.addWidget(edit)
            filters.addWidget(pair)
        actions = QtFlowLayout()
        actions.addWidget(self.count)
        actions.add_stretch()
        for button in (self.import_button, self.export_button, self.compare_button,
                       self.matrix_button):
            actions.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(filters)
        layout.addWidget(self.table, 1)
        layout.addLayout(actions)
        self._dates_toggled(emit=False)
        self._enable()

    @staticmethod
    def _date(text: str, date: QDate) -> tuple[QCheckBox, QDateEdit]:
        box = QCheckBox(text)
        edit = QDateEdit(date)
        edit.setCalendarPopup(True)
        edit.setDisplayFormat("yyyy-MM-dd")
        return box, edit

    # ---- content ------------------------------------------------------------------------------

    def filters(self) -> RunFilters:
        def seconds(date: QDate, end: bool) -> float:
            moment = QDateTime(date, QTime(23, 59, 59, 999) if end else QTime(0, 0))
            return moment.toMSecsSinceEpoch() / 1000.0

        return RunFilters(
            model=self.model_filter.currentData() or "",
            since=seconds(self.since.date(), False) if self.use_since.isChecked() else None,
            until=seconds(self.until.date(), True) if self.use_until.isChecked() else None,
            kind=self.kind_filter.currentData())

    def set_models(self, names: list[str]) -> None:
        """The model filter's choices (keeps the chosen one)."""
        keep = self.model_filter.currentData() or ""
        self.model_filter.blockSignals(True)
        self.model_filter.clear()
        self.model_filter.addItem(ALL_MODELS, "")
        for name in sorted(set(names) | ({keep} - {""})):
            self.model_filter.addItem(name, name)
        self.model_filter.setCurrentIndex(max(self.model_filter.findData(keep), 0))
        self.model_filter.blockSignals(False)

    def set_entries(self, entries: list[RunEntry]) -> None:
        keep = set(self.selected_keys())
        self.model.set_entries(entries)
        self.table.resizeColumnsToContents()
        for key in keep:
            self.select(key, clear=False)
        self.count.setText(f"{len(entries)} run{'s' if len(entries) != 1 else ''}")

    def select(self, key: str, clear: bool = True) -> None:
        row = self.model.row_of(key)
        selection = self.table.selectionModel()
        if clear:
            selection.clearSelection()
        if row >= 0:
            flags = QItemSelectionModel.SelectionFlag
            selection.select(self.model.index(row, 0), flags.Select | flags.Rows)

    def selected_keys(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.model.entry(r).key for r in rows]

    # ---- internals ----------------------------------------------------------------------------

    def _dates_toggled(self, emit: bool = True) -> None:
        self.since.setEnabled(self.use_since.isChecked())
        self.until.setEnabled(self.use_until.isChecked())
        if emit:
            self.filters_changed.emit()

    def _export(self) -> None:
        keys = self.selected_keys()
        if len(keys) == 1:
            self.export_requested.emit(keys[0])

    def _enable(self) -> None:
        n = len(self.selected_keys())
        self.export_button.setEnabled(n == 1 and self.model.entry(
            self.table.selectionModel().selectedRows()[0].row()).run_id is not None)
        self.compare_button.setEnabled(n >= 2)
