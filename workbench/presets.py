"""A preset: a named set of settings overrides, laid over a base config.

One type for every preset: the settings panel's (kept in the store, workbench/store/presets.py),
and the bench matrix's, which are the window's presets or written by hand, inline
(`NAME=key=value,key=value`, each value typed by its setting's declaration) or as a JSON file
(`{"name": {"key": value, ...}}`), both parsed here.

A preset holds only the settings it changes, so a default that changes later reaches presets
that never set it. Keys are setting names; names a setting was renamed from still apply. This
module sits on the config tree and imports nothing of the workbench above it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.config import BY_NAME, Config, ConfigError, setting_names, validate
from workbench.file_kind import read_text

_TRUE = {"1", "true", "on", "yes"}
_FALSE = {"0", "false", "off", "no"}


class PresetError(ValueError):
    """A preset that cannot be used or read; the message names it and says what to fix."""


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    settings: dict[str, Any] = field(default_factory=dict)  # setting name -> value
    # When the store last saved it (Unix seconds); None for a preset that is not stored. Store
    # metadata, not what the preset is, so equal presets compare equal whenever they were saved.
    updated_at: float | None = field(default=None, compare=False)

    def apply(self, base: Config) -> Config:
        """`base` with this preset's settings, not validated (the settings panel shows what is
        wrong itself); ConfigError for a key no setting knows."""
        return base.replace(**setting_names(self.settings))

    def config(self, base: Config) -> Config:
        """`base` with this preset's settings, validated (PresetError lists every problem)."""
        try:
            config = self.apply(base)
        except ConfigError as exc:
            raise PresetError(f"preset {self.name!r}: {exc}") from exc
        problems = validate(config)
        if problems:
            raise PresetError(f"preset {self.name!r}: " + "; ".join(p.message for p in problems))
        return config


def _setting_name(key: str) -> str:
    """Today's name for `key`; ConfigError with a "did you mean" for a key no setting knows."""
    return next(iter(setting_names({key: None})))


def parse_setting_value(key: str, text: str) -> Any:
    """Type `text` as the setting `key` declares (bool accepts on/off, true/false, 1/0)."""
    setting = BY_NAME[_setting_name(key)]
    word = text.strip().lower()
    try:
        if setting.type == "bool":
            if word in _TRUE | _FALSE:
                return word in _TRUE
            raise ValueError(text)
        if setting.type == "int":
            return int(text)
        if setting.type == "float":
            return float(text)
    except ValueError:
        kind = {"bool": "on or off", "int": "a whole number", "float": "a number"}[setting.type]
        raise PresetError(f"{setting.name}={text!r}: expected {kind}") from None
    return text


def parse_preset(text: str) -> Preset:
    """`NAME=key=value,key=value` (or just `NAME`, the base settings unchanged)."""
    name, _, body = text.partition("=")
    name = name.strip()
    settings: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise PresetError(f"preset {name!r}: {item!r} is not key=value")
        try:
            setting = _setting_name(key.strip())
        except ConfigError as exc:
            raise PresetError(f"preset {name!r}: {exc}") from exc
        settings[setting] = parse_setting_value(setting, value.strip())
    return Preset(name, settings)


def load_preset_file(path: str | Path) -> list[Preset]:
    """`{"name": {settings...}}`: values typed as JSON (validate() reports wrong types)."""
    try:
        data = json.loads(read_text(path, "a preset file"))
    except (OSError, json.JSONDecodeError) as exc:
        raise PresetError(f"{path}: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise PresetError(f'{path}: expected {{"name": {{"setting": value, ...}}, ...}}')
    presets = []
    for name, settings in data.items():
        try:
            presets.append(Preset(name, {_setting_name(k): v for k, v in settings.items()}))
        except ConfigError as exc:
            raise PresetError(f"{path}: preset {name!r}: {exc}") from exc
    return presets
