"""The bench matrix launcher: pick presets, a prompts file, repeats and tokens; run it on a
worker thread with a progress bar; hand the result to the compare view.

run_matrix blocks for minutes, so it gets a thread of its own (not the loop's shared executor,
which other work needs meanwhile). Its progress callback runs on that thread and reaches the
UI through call_soon_threadsafe. run_matrix has no cancel: closing the dialog hides it and the
matrix finishes in the background.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from workbench.bench.arms import DEFAULT_PROMPTS, ArmError, read_prompts
from workbench.bench.engine import engine_that_ends
from workbench.bench.matrix import ORDERS, MatrixError, MatrixPlan, MatrixResult, run_matrix
from workbench.config import Config
from workbench.presets import Preset, PresetError
from workbench.ui.qt_text_style import tone_text
from workbench.ui.runs.matrix_plan import build_plan, default_out_dir
from workbench.ui.tasks import Tasks


class QtMatrixDialog(QDialog):
    finished_matrix = Signal(object)  # MatrixResult

    def __init__(self, presets: list[Preset], current: Config,
                 parent: QWidget | None = None, data: Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Bench matrix")
        self.current = current
        self.tasks = Tasks(on_error=lambda exc: self._say(f"Failed: {exc}", error=True))
        self.running = False
        self.result: MatrixResult | None = None
        self.presets = QListWidget()
        for p in presets:
            item = QListWidgetItem(p.name)
            item.setData(Qt.ItemDataRole.UserRole, p)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
            self.presets.addItem(item)
        self.prompts = QLineEdit(str(DEFAULT_PROMPTS))
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._pick_prompts)
        prompts_row = QHBoxLayout()
        prompts_row.addWidget(self.prompts, 1)
        prompts_row.addWidget(browse)
        self.repeats = self._spin(1, 100, 5)
        self.tokens = self._spin(1, 1 << 20, 256, " tokens")
        self.warmup = QCheckBox("an unmeasured warm-up run per preset")
        self.warmup.setChecked(True)
        self.order = QComboBox()
        self.order.addItems(list(ORDERS))
        self.fresh = QCheckBox("each run in a fresh process (nothing warm carries over)")
        self._default_out = str(default_out_dir(data))
        self.out_dir = QLineEdit(self._default_out)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.log = QLabel("Tick two or more presets (one works too) and press Run." if presets
                          else "No presets yet: save some in the settings panel first.")
        self.log.setWordWrap(True)
        self.buttons = QDialogButtonBox()
        self.run_button = self.buttons.addButton("Run", QDialogButtonBox.ButtonRole.AcceptRole)
        self.close_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.run_button.clicked.connect(lambda: self.tasks.spawn(self.run(), name="matrix"))
        self.close_button.clicked.connect(self.hide)
        form = QFormLayout()
        form.addRow("Presets", self.presets)
        form.addRow("Prompts file", prompts_row)
        form.addRow("Repeats", self.repeats)
        form.addRow("Tokens to generate", self.tokens)
        form.addRow("Warm-up", self.warmup)
        form.addRow("Order", self.order)
        form.addRow("Isolation", self.fresh)
        form.addRow("Output folder", self.out_dir)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.progress)
        layout.addWidget(self.log)
        layout.addWidget(self.buttons)
        self._file_dialog: QFileDialog | None = None

    @staticmethod
    def _spin(low: int, high: int, value: int, suffix: str = "") -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(low, high)
        spin.setValue(value)
        spin.setSuffix(suffix)
        return spin

    def _pick_prompts(self) -> None:
        dialog = QFileDialog(self, "Prompts file (one prompt a line)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.prompts.setText)
        self._file_dialog = dialog
        dialog.open()

    def _say(self, text: str, error: bool = False) -> None:
        self.log.setText(text)
        tone_text(self.log, "error" if error else None)

    def check(self, name: str, on: bool = True) -> None:
        for i in range(self.presets.count()):
            if self.presets.item(i).text() == name:
                self.presets.item(i).setCheckState(
                    Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)

    def plan(self) -> MatrixPlan:
        """The plan the fields describe; raises ArmError or PresetError with what to fix."""
        chosen = [item.data(Qt.ItemDataRole.UserRole)
                  for item in (self.presets.item(i) for i in range(self.presets.count()))
                  if item.checkState() == Qt.CheckState.Checked]
        if not chosen:
            raise ArmError("tick at least one preset")
        prompts = read_prompts(Path(self.prompts.text().strip()))
        plan = build_plan(chosen, prompts, self.current, tokens=self.tokens.value(),
                          repeats=self.repeats.value(), warmup=self.warmup.isChecked(),
                          order=self.order.currentText(), fresh_process=self.fresh.isChecked(),
                          out_dir=Path(self.out_dir.text().strip()),
                          default_out=self.out_dir.text().strip() == self._default_out)
        plan.configs()  # every arm valid before anything runs
        return plan

    async def run(self) -> MatrixResult | None:
        if self.running:
            return None
        try:
            plan = self.plan()
        except (PresetError, ArmError, OSError) as exc:
            self._say(f"Cannot run: {exc}", error=True)
            return None
        self.running = True
        self.run_button.setEnabled(False)
        total = len(plan.schedule())
        self.progress.setRange(0, total)
        self.progress.setValue(0)
        self._say(f"Running {total} runs into {plan.out_dir}…")
        loop = asyncio.get_running_loop()

        def progress(done: int, n: int, arm: str, repeat: int) -> None:
            loop.call_soon_threadsafe(self._progress, done, n, arm, repeat)

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="matrix")
        try:
            result = await loop.run_in_executor(pool, lambda: _run_here(plan, progress))
        except (PresetError, ArmError, MatrixError, OSError) as exc:
            self._say(f"The matrix stopped: {exc}", error=True)
            return None
        finally:
            pool.shutdown(wait=False)
            self.running = False
            self.run_button.setEnabled(True)
        self.result = result
        self._say(f"Done: {len(result.runs)} measured runs in {plan.out_dir}; opened in the "
                  "compare view.")
        self.finished_matrix.emit(result)
        return result

    def _progress(self, done: int, total: int, arm: str, repeat: int) -> None:
        self.progress.setValue(done)
        what = "warm-up" if repeat == 0 else f"repeat {repeat}"
        self._say(f"{done}/{total}: {arm} {what} done")


def _run_here(plan: MatrixPlan, progress: Callable[[int, int, str, int], None]
              ) -> MatrixResult:
    """The matrix in the window's process, its sessions on an engine thread that ends with it (a
    thread that stayed would keep a second OpenMP team and slow the window's own decodes:
    bench/engine.py)."""
    with engine_that_ends("matrix-engine"):
        return run_matrix(plan, progress=progress)
