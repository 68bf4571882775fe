"""Layering contracts that import-linter cannot express, checked by reading the sources."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "workbench"
QT_MODULES = re.compile(r"^\s*(from|import)\s+(PySide6|pyqtgraph|qasync)\b", re.M)
LLAMA_IMPORT = re.compile(r"^\s*(from|import)\s+llama_cpp\b", re.M)
WORKBENCH_IMPORT = re.compile(r"^\s*(?:from|import)\s+(workbench(?:\.\w+)*)", re.M)


def _sources() -> dict[str, str]:
    return {str(p.relative_to(PACKAGE)): p.read_text() for p in PACKAGE.rglob("*.py")}


def test_only_engine_llama_imports_llama_cpp():
    offenders = [name for name, text in _sources().items() if LLAMA_IMPORT.search(text)]
    assert offenders == ["engine/llama.py"]


def test_core_layers_import_no_qt():
    core = ("engine/", "moe/", "store/", "bench/")
    offenders = [name for name, text in _sources().items()
                 if name.startswith(core) and QT_MODULES.search(text)]
    assert offenders == []


def test_only_moe_native_loads_the_native_library():
    offenders = [name for name, text in _sources().items()
                 if "ctypes.CDLL" in text and name != "moe/native.py"]
    assert offenders == []


def test_presets_sit_on_the_config_tree_only():
    # The bottom layer: everything above may use a Preset, so it may use nothing above.
    imported = set(WORKBENCH_IMPORT.findall(_sources()["presets.py"]))
    assert imported <= {"workbench.config", "workbench.paths"}
