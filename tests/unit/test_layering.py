"""The layering is a checked contract: import-linter's contracts (pyproject.toml), run here, plus
what import-linter cannot express (no import cycle anywhere, the one loader of the native library).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "workbench"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    # --no-cache: a cache left by an earlier tree must never vouch for this one.
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_import_contracts_hold():
    run = _lint_imports(REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    ("engine/metrics.py", "import PySide6", "Qt only in ui"),
    ("moe/layout.py", "from workbench.engine import requests", "Layers point downward"),
    ("engine/prompt.py", "import llama_cpp", "llama_cpp only in backend.llama"),
    ("engine/images.py", "import llama_cpp.mtmd_cpp", "llama_cpp only in backend.llama"),
    ("ui/chat/shown.py", "from workbench.engine import session", "engine.session only"),
    ("server/app.py", "import PySide6", "Qt only in ui"),
    ("server/runner.py", "from workbench.ui import bridge", "Layers point downward"),
    ("cli/runs.py", "from workbench.ui.runs import qt_runs_page", "cli reaches ui only"),
    # Its own exceptions are per module: the window entry point's licence is not the CLI's.
    ("cli/replay.py", "from workbench.ui import qt_app", "cli reaches ui only"),
])
def test_the_contracts_catch_a_violation(tmp_path, module, line, contract):
    """Negative control: each contract fails on a copy of the tree with one bad import added."""
    shutil.copytree(PACKAGE, tmp_path / "workbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    target = tmp_path / "workbench" / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0
    broken = [ln for ln in run.stdout.splitlines() if "BROKEN" in ln]
    assert any(contract in ln for ln in broken), run.stdout


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_cycles():
    assert cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert cycles({"a": ["b"], "b": [], "c": ["a", "b"]}) == []


def test_no_module_imports_itself_back():
    """No import cycle between any two modules (import-linter checks layers, not modules)."""
    graph = grimp.build_graph("workbench", cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    # Every import statement counts, nested ones included: a function-level import is still an
    # arrow, and it was one (config.py -> config_cli.py -> config.py) before this test existed.
    assert cycles(edges) == []


def test_only_backend_native_loads_the_native_library():
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if "ctypes.CDLL" in p.read_text() and p.relative_to(PACKAGE).as_posix()
                 != "backend/native.py"]
    assert offenders == []


def test_ui_modules_that_import_qt_are_named_qt():
    # The qt_ prefix tells at a glance which modules need a QApplication and which a plain test
    # can import; a Qt-free module keeps a plain name. No exceptions so far: qt_check.py,
    # which imports PySide6 only to probe it, carries the prefix too.
    graph = grimp.build_graph("workbench", include_external_packages=True, cache_dir=None)
    qt = [m for m in ("PySide6", "pyqtgraph", "qasync") if m in graph.modules]
    assert qt, "the graph has no Qt packages: this check would pass vacuously"
    offenders = [m for m in sorted(graph.modules)
                 if m.startswith("workbench.ui.") and not m.rsplit(".", 1)[-1].startswith("qt_")
                 and any(graph.direct_import_exists(importer=m, imported=q) for q in qt)]
    assert offenders == []


# The hub stays small (issue 37): conversation memory, opening, turn plans and the loop live in
# their own modules; a session that grows past this has taken one of them back.
SESSION_MAX_LINES = 450


def test_the_session_module_stays_small():
    lines = (PACKAGE / "engine" / "session.py").read_text(encoding="utf-8").count("\n")
    assert lines <= SESSION_MAX_LINES, (
        f"engine/session.py has {lines} lines (at most {SESSION_MAX_LINES}): move what grew into "
        "the module it belongs to")
