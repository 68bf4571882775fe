"""The settings dock's content: the generated panel above, presets below, wired together.

Mount: `page = QtSettingsPage(config, db.call)` in a dock; `await page.start()` once the loop
runs (fills the preset list and the lossy settings' measured costs); connect
`page.applied(config, reopen)` and `page.rerun_with(config)`; call `page.set_config(config)`
whenever a model opens elsewhere. A lossy setting's Price it scores in the background
(pricer.py) and records a scored run, whose cost the panel then shows.
"""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from workbench.config import Config
from workbench.ui.settings.preset_store import PresetStore, StoreCall
from workbench.ui.settings.pricer import Pricer
from workbench.ui.settings.qt_presets_box import QtPresetsBox
from workbench.ui.settings.qt_settings_panel import QtSettingsPanel
from workbench.ui.tasks import Tasks

SCORED_SCAN = 200  # the newest scored runs searched for a configuration's cost


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
        self.call = call
        self.pricer = Pricer(call)
        self.panel.price_requested.connect(
            lambda name, config: self.tasks.spawn(self.price(name, config), name="price"))
        self.panel.stop_pricing_requested.connect(self.pricer.stop)
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
        await self.refresh_costs()

    def set_config(self, config: Config) -> None:
        self.panel.set_config(config)
        try:  # a scored run may be newer (a `workbench score` meanwhile); start() reads them
            asyncio.get_running_loop()  # the first time, so before the loop runs there is
        except RuntimeError:  # nothing to refresh
            return
        self.tasks.spawn(self.refresh_costs(), name="costs")

    async def refresh_costs(self) -> None:
        """The scored runs the lossy settings' costs come from (newest first)."""
        self.panel.set_scored_runs(await self.call(lambda s: s.list_runs(scored=True,
                                                                         limit=SCORED_SCAN)))

    async def price(self, name: str, config: Config) -> int | None:
        """Score the pending settings for `name`'s Price it; the new run's id, or None."""
        self.panel.pricing_started(name)
        try:
            priced = await self.pricer.price(config, self.panel.pricing_progress)
        except BaseException:
            self.panel.pricing_finished("failed")
            raise
        if priced.run_id is not None:
            await self.refresh_costs()
        self.panel.pricing_finished(priced.note)
        return priced.run_id

    @property
    def tasks(self) -> Tasks:
        """The presets box's background work (tests and shutdown wait on it)."""
        return self.presets.tasks
