"""The settings dock's content: the generated panel above, presets below, wired together.

Mount: `page = QtSettingsPage(config, db.call)` in a dock; `await page.start()` once the loop
runs (fills the preset list); connect `page.applied(config, reopen)` and
`page.rerun_with(config)`; call `page.set_config(config)` whenever a model opens elsewhere.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from workbench.config import Config
from workbench.ui.settings.preset_store import PresetStore, StoreCall
from workbench.ui.settings.qt_presets_box import QtPresetsBox
from workbench.ui.settings.qt_settings_panel import QtSettingsPanel
from workbench.ui.tasks import Tasks


class QtSettingsPage(QWidget):
    applied = Signal(object, bool)  # Config, reopen
    rerun_with = Signal(object)  # Config

    def __init__(self, config: Config, call: StoreCall, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = QtSettingsPanel(config)
        self.presets = QtPresetsBox(PresetStore(call), config)
        self.panel.pending_changed.connect(self.presets.set_config)
        self.presets.loaded.connect(self.panel.set_pending)
        self.panel.applied.connect(self.applied)
        self.presets.rerun_with.connect(self.rerun_with)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.panel)
        splitter.addWidget(self.presets)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(splitter)

    async def start(self) -> None:
        await self.presets.refresh()

    def set_config(self, config: Config) -> None:
        self.panel.set_config(config)

    @property
    def tasks(self) -> Tasks:
        """The presets box's background work (tests and shutdown wait on it)."""
        return self.presets.tasks
