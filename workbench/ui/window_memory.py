"""What the window remembers between runs (Qt-free): its geometry and dock layout, the theme,
the last conversation, and the last model with the settings it was open with.

One small JSON file in the data directory (`window.json`), written whole or not at all
(atomic_write), beside the conversations and the recent-models list. Not QSettings: its files
live outside the data directory (~/.config), so the tests' and screenshots' temporary data
directories (WORKBENCH_DATA_DIR) would not keep a run from touching the user's own; here
every window on a data directory remembers into that directory only. A missing, damaged or
foreign file is an empty memory: the window opens as on a first start.
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from workbench.atomic_write import write_text_atomic
from workbench.config import Config, ConfigError, validate
from workbench.engine.model_defaults import model_defaults
from workbench.file_kind import read_text

log = logging.getLogger("workbench.ui")

FILE_NAME = "window.json"
THEMES = ("system", "light", "dark")  # "system" follows the desktop's light or dark scheme


@dataclass(slots=True)
class WindowMemory:
    geometry: str = ""  # QMainWindow.saveGeometry(), base64
    dock_state: str = ""  # QMainWindow.saveState(), base64
    theme: str = "system"
    conversation_id: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # the last model's Config.to_dict()

    @staticmethod
    def encode(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    @staticmethod
    def decode(text: str) -> bytes:
        try:
            return base64.b64decode(text.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            return b""


def memory_file(data: Path) -> Path:
    return data / FILE_NAME


def load_memory(data: Path) -> WindowMemory:
    try:
        raw = json.loads(read_text(memory_file(data)))
    except (OSError, ValueError):
        return WindowMemory()
    if not isinstance(raw, dict):
        return WindowMemory()
    memory = WindowMemory()
    for f in fields(WindowMemory):
        value = raw.get(f.name)
        if f.name == "conversation_id":
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        else:
            ok = isinstance(value, type(getattr(memory, f.name)))
        if ok:
            setattr(memory, f.name, value)
    if memory.theme not in THEMES:
        memory.theme = "system"
    return memory


def save_memory(data: Path, memory: WindowMemory) -> None:
    """Raises OutputFileError when it cannot be written (the earlier file stays whole)."""
    data.mkdir(parents=True, exist_ok=True)  # the data directory is ours to create
    write_text_atomic(memory_file(data), json.dumps(asdict(memory), indent=1))


@dataclass(frozen=True, slots=True)
class StartupConfig:
    config: Config
    notice: str = ""  # why the remembered model was not used ("" when it was, or none was)
    from_memory: bool = False  # `config` is the last model's (else the bundled model's defaults)


def startup_config(memory: WindowMemory) -> StartupConfig:
    """The config to start from: the last model and its settings when that file is still
    there, else the bundled model with its own defaults and a notice that says why."""
    if not memory.settings:
        return StartupConfig(model_defaults())
    try:
        config = Config.from_dict(memory.settings)
    except (ConfigError, TypeError):  # settings of another version: start from the defaults
        return StartupConfig(model_defaults())
    if validate(config):
        return StartupConfig(model_defaults())
    if config.model and not Path(config.model).is_file():
        return StartupConfig(model_defaults(), (
            f"The model you had open last, {config.model}, is no longer there, so the "
            "bundled model was opened instead. Open another with File > Open model…."))
    return StartupConfig(config, from_memory=True)
