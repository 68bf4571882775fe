"""Layering contracts that import-linter cannot express, checked by reading the sources."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "workbench"
QT_MODULES = re.compile(r"^\s*(from|import)\s+(PySide6|pyqtgraph|qasync)\b", re.M)
LLAMA_IMPORT = re.compile(r"^\s*(from|import)\s+llama_cpp\b", re.M)
QT_PACKAGES = ("PySide6", "pyqtgraph", "qasync")
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


def _imports_qt(source: str) -> bool:
    """Any import of a Qt package, at the top or inside a function (qt_app imports qasync late)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name.split(".")[0] in QT_PACKAGES for name in names):
            return True
    return False


def test_ui_modules_that_import_qt_are_named_qt():
    # The qt_ prefix tells at a glance which modules need a QApplication and which a plain test
    # can import; a Qt-free module keeps a plain name. No exceptions so far: qt_check.py,
    # which imports PySide6 only to probe it, carries the prefix too.
    offenders = [name for name, text in _sources().items()
                 if name.startswith("ui/") and _imports_qt(text)
                 and not Path(name).name.startswith("qt_")]
    assert offenders == []
