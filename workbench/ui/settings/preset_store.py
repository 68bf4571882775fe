"""Presets through the database worker: the box awaits these, the store runs on its thread.

A preset holds a config's differences from the defaults, so it stays small and a default that
changes later reaches presets that never set it. Loading one gives defaults + its settings,
except that a preset without a model keeps the model that is open: presets are mostly about
how to run, and the bundled model is not spelled in a difference from the defaults.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from workbench.config import Config
from workbench.presets import Preset
from workbench.store import Store

StoreCall = Callable[[Callable[[Store], Any]], Awaitable[Any]]  # AsyncStore.call


def preset_settings(config: Config) -> dict[str, Any]:
    return config.diff_from_defaults()


def config_from_preset(preset: Preset, current: Config) -> Config:
    """Defaults plus the preset, over the open model; raises ConfigError for a key no setting
    knows (a preset that sets a model replaces the open one)."""
    return preset.apply(Config(model=current.model))


class PresetStore:
    def __init__(self, call: StoreCall) -> None:
        self._call = call

    async def list_presets(self) -> list[Preset]:
        return await self._call(lambda s: s.list_presets())

    async def save(self, name: str, config: Config) -> Preset:
        settings = preset_settings(config)
        return await self._call(lambda s: s.save_preset(name, settings))

    async def save_settings(self, name: str, settings: Mapping[str, Any]) -> Preset:
        data = dict(settings)
        return await self._call(lambda s: s.save_preset(name, data))

    async def preset(self, name: str) -> Preset:
        return await self._call(lambda s: s.load_preset(name))

    async def rename(self, old: str, new: str) -> None:
        await self._call(lambda s: s.rename_preset(old, new))

    async def delete(self, name: str) -> None:
        await self._call(lambda s: s.delete_preset(name))
