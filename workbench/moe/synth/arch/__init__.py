"""The architectures of synthetic model, one module each: every module here that defines
`ARCH` (an Architecture) is one, in the order of its rank."""

from __future__ import annotations

import importlib
import pkgutil

from workbench.moe.synth.architecture import Architecture, all_layers
from workbench.moe.synth.spec import SynthSpec


def discover(paths: list[str] = __path__, package: str = __name__) -> dict[str, Architecture]:
    """The architectures defined by the modules under `paths` (the package `package`)."""
    found = []
    for module in pkgutil.iter_modules(paths):
        arch = getattr(importlib.import_module(f"{package}.{module.name}"), "ARCH", None)
        if isinstance(arch, Architecture):
            found.append(arch)
    return {a.name: a for a in sorted(found, key=lambda a: a.rank)}


ARCHITECTURES: dict[str, Architecture] = discover()
ARCHES: tuple[str, ...] = tuple(ARCHITECTURES)


def moe_layers(spec: SynthSpec) -> list[int]:
    """Layers that have experts: all for most; all but the first for gemma4 (as upstream)."""
    arch = ARCHITECTURES.get(spec.arch)
    return arch.moe_layers(spec) if arch is not None else all_layers(spec)
