"""What a bench matrix runs: its arms (named presets of settings overrides) and its prompt set.

Presets come inline (`NAME=key=value,key=value`, typed by each setting's declaration) or from a
JSON file (`{"name": {"key": value, ...}}`), so the matrix needs nothing from the preset store.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.config import BY_NAME, RENAMED, Config, ConfigError, validate
from workbench.paths import REPO_ROOT

DEFAULT_PROMPTS = REPO_ROOT / "resources" / "prompts" / "default.txt"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # a preset name is also part of a file name
_TRUE = {"1", "true", "on", "yes"}
_FALSE = {"0", "false", "off", "no"}


class ArmError(ValueError):
    """A preset or prompt set that cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class Preset:
    name: str
    overrides: dict[str, Any] = field(default_factory=dict)  # Config field -> value

    def config(self, base: Config) -> Config:
        """`base` with this preset's overrides, validated (ArmError lists every problem)."""
        try:
            config = base.replace(**self.overrides)
        except ConfigError as exc:
            raise ArmError(f"preset {self.name!r}: {exc}") from exc
        problems = validate(config)
        if problems:
            raise ArmError(f"preset {self.name!r}: " + "; ".join(p.message for p in problems))
        return config


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ArmError(f"preset name {name!r}: use letters, digits, '.', '_' or '-' "
                       "(it names the run files), starting with a letter or digit")
    return name


def _setting_name(key: str) -> str:
    name = RENAMED.get(key, key)
    if name not in BY_NAME:
        Config().replace(**{key: None})  # raises ConfigError with a "did you mean"
    return name


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
        raise ArmError(f"{setting.name}={text!r}: expected {kind}") from None
    return text


def parse_preset(text: str) -> Preset:
    """`NAME=key=value,key=value` (or just `NAME`, the base settings unchanged)."""
    name, _, body = text.partition("=")
    name = _check_name(name.strip())
    overrides: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ArmError(f"preset {name!r}: {item!r} is not key=value")
        try:
            setting = _setting_name(key.strip())
        except ConfigError as exc:
            raise ArmError(f"preset {name!r}: {exc}") from exc
        overrides[setting] = parse_setting_value(setting, value.strip())
    return Preset(name, overrides)


def load_preset_file(path: str | Path) -> list[Preset]:
    """`{"name": {settings...}}`: values typed as JSON (validate() reports wrong types)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ArmError(f"{path}: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ArmError(f'{path}: expected {{"name": {{"setting": value, ...}}, ...}}')
    presets = []
    for name, settings in data.items():
        try:
            overrides = {_setting_name(k): v for k, v in settings.items()}
        except ConfigError as exc:
            raise ArmError(f"{path}: preset {name!r}: {exc}") from exc
        presets.append(Preset(_check_name(name), overrides))
    return presets


def check_unique(presets: list[Preset]) -> list[Preset]:
    names = [p.name for p in presets]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ArmError(f"preset names must differ: {', '.join(twice)} given more than once")
    if not presets:
        raise ArmError("no presets: give --preset NAME=key=value,... or --preset-file FILE")
    return presets


def read_prompts(path: str | Path = DEFAULT_PROMPTS) -> list[str]:
    """One prompt per line; blank lines and lines starting with '#' are skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    prompts = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if not prompts:
        raise ArmError(f"{path}: no prompts (one a line)")
    return prompts
