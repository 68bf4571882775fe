"""What the window remembers between runs, read from and written into the window: its geometry
and dock layout, the theme, the last conversation, the last model with its settings
(`window_memory.py` keeps the file; this is the window's side of it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QMainWindow

from workbench.ui.bridge import LoadedModel
from workbench.ui.window_memory import WindowMemory, load_memory, save_memory

log = logging.getLogger("workbench.ui")


class RememberedWindow:
    def __init__(self, window: QMainWindow, data: Path, spawn: Callable[..., Any],
                 conversation: Callable[[], int | None], theme: Callable[[], str]) -> None:
        self.window, self.data, self._spawn = window, data, spawn
        self._conversation, self._theme = conversation, theme
        self.memory = load_memory(data)
        self._taken = False

    def restore_layout(self) -> None:
        geometry = WindowMemory.decode(self.memory.geometry)
        if geometry:
            self.window.restoreGeometry(QByteArray(geometry))
        state = WindowMemory.decode(self.memory.dock_state)
        if state:
            self.window.restoreState(QByteArray(state))

    def model_changed(self, model: LoadedModel | None) -> None:
        """The next start opens this model with these settings (saved now: a crash keeps it)."""
        if model is None:
            return
        self.memory.settings = model.config.to_dict()
        self._spawn(self.save(self.memory), name="window-memory")

    def take(self) -> WindowMemory:
        """The window as it is now (read while its widgets exist, written off the UI thread)."""
        memory = self.memory
        if not self._taken:
            memory.geometry = WindowMemory.encode(bytes(self.window.saveGeometry().data()))
            memory.dock_state = WindowMemory.encode(bytes(self.window.saveState().data()))
            memory.conversation_id = self._conversation()
            memory.theme = self._theme()
            self._taken = True
        return memory

    async def save(self, memory: WindowMemory) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, save_memory, self.data,
                                                             memory)
        except OSError as exc:
            # A convenience, not the user's work: the next start opens as a first one. (No
            # notice: this also runs at shutdown, when the window's widgets may be gone.)
            log.warning("the window's layout and last model were not remembered: %s", exc)
