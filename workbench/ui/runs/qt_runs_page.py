"""The runs page: the runs list above, the compare view below, and the work behind them.

Stored runs come from the database worker; imported metrics files (ours and upstream
bmoe_metrics v1/v2) are kept in memory for this session, beside them in the list. File reads,
writes and the compare table's bootstrap run off the UI thread. File dialogs open without a
nested event loop (QFileDialog.open) and hand their choice to a coroutine.

Mount: `page = QtRunsPage(db.call, config)`; `await page.refresh()` once the loop runs;
`page.set_config(config)` when the open model changes (the matrix's base model); call
`page.refresh()` after a generation to show the new run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QLabel, QSplitter, QVBoxLayout, QWidget

from workbench.bench.compare import CompareTable
from workbench.bench.matrix import MatrixResult
from workbench.config import Config
from workbench.engine.metrics_reader import MetricsFile, MetricsFormatError, read_metrics_csv
from workbench.runs.entries import LoadedRun, RunEntry, entry_from_csv, entry_from_run
from workbench.runs.run_csv import run_metrics, write_run_csv
from workbench.ui.qt_text_style import status_text
from workbench.ui.runs.qt_compare_view import QtCompareView
from workbench.ui.runs.qt_matrix_dialog import QtMatrixDialog
from workbench.ui.runs.qt_runs_list import QtRunsList
from workbench.ui.settings.preset_store import StoreCall
from workbench.ui.tasks import Tasks

MODEL_SCAN = 2000  # recent runs scanned for the model filter's names
CSV_FILTER = "Metrics CSV (*.csv);;All files (*)"


def _read(paths: list[str]) -> tuple[list[tuple[RunEntry, MetricsFile]], list[str]]:
    loaded, errors = [], []
    for path in paths:
        try:
            mf = read_metrics_csv(path)
            loaded.append((entry_from_csv(path, mf), mf))
        except (OSError, MetricsFormatError) as exc:
            errors.append(str(exc))
    return loaded, errors


class QtRunsPage(QWidget):
    def __init__(self, call: StoreCall, config: Config, parent: QWidget | None = None,
                 data: Path | None = None) -> None:
        super().__init__(parent)
        self.call, self.config, self.data = call, config, data
        self.tasks = Tasks(on_error=lambda exc: self.show_status(f"Failed: {exc}", error=True))
        self.imported: dict[str, tuple[RunEntry, MetricsFile]] = {}
        self.entries: dict[str, RunEntry] = {}
        self.runs_list = QtRunsList()
        self.compare_view = QtCompareView()
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.matrix_dialog: QtMatrixDialog | None = None
        self._file_dialog: QFileDialog | None = None
        spawn = self.tasks.spawn
        self.runs_list.filters_changed.connect(lambda: spawn(self.refresh(), name="refresh"))
        self.runs_list.compare_requested.connect(lambda keys: spawn(self.compare(keys),
                                                                    name="compare"))
        self.runs_list.import_requested.connect(self._import_dialog)
        self.runs_list.export_requested.connect(self._export_dialog)
        self.runs_list.matrix_requested.connect(lambda: spawn(self.open_matrix_dialog()))
        top = QWidget()
        column = QVBoxLayout(top)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.runs_list, 1)
        column.addWidget(self.status)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(top)
        splitter.addWidget(self.compare_view)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)

    def set_config(self, config: Config) -> None:
        self.config = config

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        status_text(self.status, error)

    # ---- the list -----------------------------------------------------------------------------

    async def refresh(self) -> list[RunEntry]:
        filters = self.runs_list.filters()
        kwargs = filters.store_kwargs()

        def fetch(store: Any) -> tuple[list[Any], list[str]]:
            runs = store.list_runs(**kwargs) if filters.wants_stored else []
            names = {r.model.get("name", "") for r in store.list_runs(limit=MODEL_SCAN)}
            return runs, sorted(n for n in names if n)

        runs, names = await self.call(fetch)
        entries = [entry_from_run(r) for r in runs]
        entries += [e for e, _ in self.imported.values() if filters.keeps(e)]
        entries.sort(key=lambda e: e.created_at, reverse=True)
        self.entries = {e.key: e for e in entries}
        self.runs_list.set_models(names + [e.model for e, _ in self.imported.values() if e.model])
        self.runs_list.set_entries(entries)
        return entries

    async def import_csvs(self, paths: list[str]) -> list[RunEntry]:
        loop = asyncio.get_running_loop()
        loaded, errors = await loop.run_in_executor(None, _read, list(paths))
        for entry, mf in loaded:
            self.imported[entry.key] = (entry, mf)
        await self.refresh()
        for entry, _ in loaded:
            self.runs_list.select(entry.key, clear=False)
        note = f"Imported {len(loaded)} file{'s' if len(loaded) != 1 else ''}."
        self.show_status(" ".join([note, *errors]), error=bool(errors))
        return [e for e, _ in loaded]

    async def export_run(self, key: str, path: str | Path) -> Path | None:
        """The stored run as a metrics CSV at `path`; None (and the status says why) when the
        file could not be written."""
        run_id = self.entries[key].run_id
        if run_id is None:
            raise ValueError("only stored runs export; an imported file is a CSV already")
        run, rows = await self.call(lambda s: (s.get_run(run_id), s.token_rows(run_id)))
        try:
            out = await asyncio.get_running_loop().run_in_executor(
                None, write_run_csv, path, run, rows)
        except OSError as exc:  # OutputFileError: written whole or not at all, and says why
            self.show_status(f"Run {run_id} was not exported: {exc}", error=True)
            return None
        self.show_status(f"Exported run {run_id} ({len(rows)} tokens) to {out}.")
        return out

    # ---- comparing ----------------------------------------------------------------------------

    async def load(self, keys: list[str]) -> list[LoadedRun]:
        """The runs as metrics files, labelled uniquely, in the order given."""
        out: list[LoadedRun] = []
        loop = asyncio.get_running_loop()
        for key in keys:
            entry = self.entries.get(key) or self.imported[key][0]
            quality: dict[str, Any] = {}
            if key in self.imported:
                mf = self.imported[key][1]
            else:
                rid = entry.run_id
                run, rows = await self.call(lambda s, r=rid: (s.get_run(r), s.token_rows(r)))
                mf = await loop.run_in_executor(None, run_metrics, run, rows)
                quality = run.quality  # a scored run's figures join the compare table
            out.append(LoadedRun(_unique(entry.label, out), mf, entry.path or "", quality))
        return out

    async def compare(self, keys: list[str]) -> CompareTable | None:
        if len(keys) < 2:
            self.show_status("Select two or more runs to compare.", error=True)
            return None
        runs = await self.load(keys)
        table = await self.compare_view.compare(runs)
        self.show_status(f"Compared {len(runs)} runs.")
        return table

    async def open_matrix_result(self, result: MatrixResult) -> None:
        """Add the matrix's files to the list and show its table (arms hold the repeats)."""
        paths = [str(r.path) for r in result.runs]
        entries = await self.import_csvs(paths)
        runs = [LoadedRun(f"{r.arm} r{r.repeat}", self.imported[e.key][1], e.path or "")
                for r, e in zip(result.runs, entries, strict=True)]
        self.compare_view.show_runs(runs, result.table)

    async def open_matrix_dialog(self) -> QtMatrixDialog:
        presets = await self.call(lambda s: s.list_presets())
        if self.matrix_dialog is not None and self.matrix_dialog.running:
            self.matrix_dialog.show()
            return self.matrix_dialog
        dialog = QtMatrixDialog(presets, self.config, self, data=self.data)
        dialog.finished_matrix.connect(
            lambda result: self.tasks.spawn(self.open_matrix_result(result)))
        self.matrix_dialog = dialog
        dialog.open()
        return dialog

    # ---- dialogs ------------------------------------------------------------------------------

    def _import_dialog(self) -> None:
        dialog = QFileDialog(self, "Import metrics CSV files")
        dialog.setNameFilter(CSV_FILTER)
        dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
        dialog.filesSelected.connect(lambda paths: self.tasks.spawn(self.import_csvs(paths)))
        self._file_dialog = dialog
        dialog.open()

    def _export_dialog(self, key: str) -> None:
        entry = self.entries[key]
        dialog = QFileDialog(self, "Export the run as a metrics CSV")
        dialog.setNameFilter(CSV_FILTER)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setDefaultSuffix("csv")
        dialog.selectFile(f"run-{entry.run_id}.csv")
        dialog.fileSelected.connect(lambda path: self.tasks.spawn(self.export_run(key, path)))
        self._file_dialog = dialog
        dialog.open()


def _unique(label: str, taken: list[LoadedRun]) -> str:
    names = {r.label for r in taken}
    out, n = label, 2
    while out in names:
        out, n = f"{label} ({n})", n + 1
    return out
