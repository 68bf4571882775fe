"""Chat templates for GGUFs that carry none, chosen by architecture.

A model file's own template always wins; this only keeps chat mode usable (and says so) for files
that were converted without one, like the embedded gemma-3-270m.
"""

from __future__ import annotations

from pathlib import Path

from workbench.paths import resources_dir

TEMPLATES_DIR = resources_dir() / "templates"

_BY_ARCH_PREFIX = (("gemma", "gemma.jinja"),)
_DEFAULT = "chatml.jinja"


def fallback_template_path(arch: str) -> Path:
    for prefix, name in _BY_ARCH_PREFIX:
        if arch.startswith(prefix):
            return TEMPLATES_DIR / name
    return TEMPLATES_DIR / _DEFAULT


def fallback_template(arch: str) -> tuple[str, str]:
    """(template source, its name) for a model of `arch` without a template of its own."""
    path = fallback_template_path(arch)
    return path.read_text(), path.stem
