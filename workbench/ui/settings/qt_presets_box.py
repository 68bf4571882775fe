"""Presets: save the pending settings under a name, load, rename (edit in place), delete with
undo, and re-run the current turn with one; plus the pending settings as changes from defaults.

Every store call is a coroutine on the box's own Tasks, so a failure shows in its status line.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.config import Config, ConfigError
from workbench.presets import Preset
from workbench.ui.qt_text_style import status_text
from workbench.ui.settings.evaluate import changes_text
from workbench.ui.settings.preset_store import PresetStore, config_from_preset
from workbench.ui.tasks import Tasks

NO_CHANGES = "Every setting is at its default"


class QtPresetsBox(QGroupBox):
    loaded = Signal(object)  # Config: show it in the panel as pending edits
    rerun_with = Signal(object)  # Config: regenerate the current turn with it (a sibling answer)

    def __init__(self, store: PresetStore, config: Config, parent: QWidget | None = None) -> None:
        super().__init__("Presets", parent)
        self.store = store
        self.tasks = Tasks(on_error=lambda exc: self.show_status(str(exc), error=True))
        self._config = config
        self._filling = False
        self._undo: Preset | None = None
        self.presets: dict[str, Preset] = {}

        self.list = QListWidget()
        self.list.setToolTip("Double-click a name to rename the preset")
        self.list.itemChanged.connect(self._renamed)
        self.list.itemDoubleClicked.connect(self.list.editItem)
        self.name = QLineEdit()
        self.name.setPlaceholderText("Name for the current settings")
        self.name.returnPressed.connect(self._save_clicked)
        self.save_button = self._button("Save", "Save the settings shown as a preset "
                                        "(overwrites one with the same name)", self._save_clicked)
        self.load_button = self._button("Load", "Show the preset's settings; Apply uses them",
                                        lambda: self._with_selected(self.load))
        self.delete_button = self._button("Delete", "Delete the preset (Undo brings it back)",
                                          lambda: self._with_selected(self.delete))
        self.rerun_button = self._button(
            "Re-run this turn with it", "Answer the last question again with the preset's "
            "settings; both answers and their runs are kept",
            lambda: self._with_selected(self.rerun))
        self.undo_button = self._button("Undo", "", self._undo_clicked)
        self.undo_button.setVisible(False)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.changes_title = QLabel("<b>Changes from defaults</b>")
        self.changes = QListWidget()
        self.changes.setMaximumHeight(120)
        self.changes.setSelectionMode(QListWidget.SelectionMode.NoSelection)

        save_row = QHBoxLayout()
        save_row.addWidget(self.name, 1)
        save_row.addWidget(self.save_button)
        actions = QHBoxLayout()
        for button in (self.load_button, self.delete_button, self.rerun_button):
            actions.addWidget(button)
        actions.addStretch(1)
        status_row = QHBoxLayout()
        status_row.addWidget(self.status, 1)
        status_row.addWidget(self.undo_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list, 1)
        layout.addLayout(actions)
        layout.addLayout(save_row)
        layout.addLayout(status_row)
        layout.addWidget(self.changes_title)
        layout.addWidget(self.changes)
        self.list.currentItemChanged.connect(lambda *_: self._enable())
        self.set_config(config)
        self._enable()

    def _button(self, text: str, tip: str, slot: Any) -> QPushButton:
        button = QPushButton(text)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    # ---- what the panel shows -----------------------------------------------------------------

    def set_config(self, config: Config) -> None:
        """The settings a Save would store, shown as their changes from the defaults."""
        self._config = config
        self.changes.clear()
        self.changes.addItems(changes_text(config) or [NO_CHANGES])

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        status_text(self.status, error)

    def names(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def select(self, name: str) -> None:
        for i in range(self.list.count()):
            if self.list.item(i).text() == name:
                self.list.setCurrentRow(i)
                return

    @property
    def selected(self) -> str | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    # ---- coroutines ---------------------------------------------------------------------------

    async def refresh(self, select: str | None = None) -> None:
        keep = select or self.selected
        presets = await self.store.list_presets()
        self.presets = {p.name: p for p in presets}
        self._filling = True
        self.list.clear()
        for p in presets:
            item = QListWidgetItem(p.name)
            item.setData(Qt.ItemDataRole.UserRole, p.name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
            item.setToolTip(_preset_tip(p))
            self.list.addItem(item)
        self._filling = False
        if keep:
            self.select(keep)
        self._enable()

    async def save(self, name: str) -> None:
        name = name.strip()
        if not name:
            self.show_status("Type a name for the preset first.", error=True)
            return
        existed = name in self.presets
        await self.store.save(name, self._config)
        await self.refresh(select=name)
        self.show_status(f"{'Updated' if existed else 'Saved'} preset '{name}'.")

    async def load(self, name: str) -> Config:
        config = config_from_preset(await self.store.preset(name), self._config)
        self.loaded.emit(config)
        self.show_status(f"Loaded '{name}': Apply to use it.")
        return config

    async def rename(self, old: str, new: str) -> None:
        try:
            await self.store.rename(old, new.strip())
        except ValueError as exc:  # an existing name, or an empty one
            self.show_status(f"Cannot rename '{old}': {exc}.", error=True)
            await self.refresh(select=old)
            return
        await self.refresh(select=new.strip())
        self.show_status(f"Renamed '{old}' to '{new.strip()}'.")

    async def delete(self, name: str) -> None:
        preset = await self.store.preset(name)
        await self.store.delete(name)
        self._undo = preset
        await self.refresh()
        self.show_status(f"Deleted '{name}'.")
        self.undo_button.setVisible(True)

    async def undo_delete(self) -> None:
        if self._undo is None:
            return
        name, settings = self._undo.name, self._undo.settings
        self._undo = None
        self.undo_button.setVisible(False)
        await self.store.save_settings(name, settings)
        await self.refresh(select=name)
        self.show_status(f"Restored '{name}'.")

    async def rerun(self, name: str) -> Config:
        config = config_from_preset(await self.store.preset(name), self._config)
        self.rerun_with.emit(config)
        self.show_status(f"Re-running this turn with '{name}'.")
        return config

    # ---- slots --------------------------------------------------------------------------------

    def _save_clicked(self) -> None:
        self.tasks.spawn(self.save(self.name.text()), name="preset-save")

    def _undo_clicked(self) -> None:
        self.tasks.spawn(self.undo_delete())

    def _with_selected(self, action: Any) -> None:
        if self.selected is not None:
            self.tasks.spawn(action(self.selected))

    def _renamed(self, item: QListWidgetItem) -> None:
        old = item.data(Qt.ItemDataRole.UserRole)
        if self._filling or old is None or item.text() == old:
            return
        self.tasks.spawn(self.rename(old, item.text()))

    def _enable(self) -> None:
        chosen = self.selected is not None
        for button in (self.load_button, self.delete_button, self.rerun_button):
            button.setEnabled(chosen)


def _preset_tip(preset: Preset) -> str:
    try:
        return "\n".join(changes_text(config_from_preset(preset, Config()))) or NO_CHANGES
    except ConfigError as exc:  # a preset saved by a version with other settings
        return f"Cannot be loaded: {exc}"
