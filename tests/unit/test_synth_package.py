"""Synthetic models are a package with one module per architecture (issue 27): each module in
moe/synth/arch/ defines its Architecture (what tensors, what metadata) and is found there, so
adding one touches one file; no other module of the package names an architecture."""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

from workbench.moe import synth
from workbench.moe.synth import arch as arch_package
from workbench.moe.synth.arch import ARCHITECTURES, discover

PACKAGE = Path(synth.__file__).parent
DEFAULT = "qwen3moe"  # spec_for's and SynthSpec's default, the one name allowed outside arch/


def test_every_architecture_is_one_module_and_is_found():
    modules = sorted(p.stem for p in (PACKAGE / "arch").glob("*.py") if p.stem != "__init__")
    assert sorted(ARCHITECTURES) == modules
    assert synth.ARCHES == ("qwen3moe", "gemma4", "bailingmoe3", "deepseek4")  # by rank
    for name, arch in ARCHITECTURES.items():
        assert arch.name == name and callable(arch.plans)


def test_no_module_outside_arch_names_an_architecture():
    names = set(ARCHITECTURES) - {DEFAULT}
    found = []
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef) and n.body
                      and isinstance(n.body[0], ast.Expr)}
        found += [f"{path.name}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and n.value in names
                  and id(n) not in docstrings]
        found += [f"{path.name}: imports arch.{n.module}" for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module
                  and n.module.rsplit(".", 1)[-1] in names and path.name != "__init__.py"]
    assert found == []


def test_a_new_architecture_is_one_module(tmp_path, monkeypatch):
    package = tmp_path / "more_arches"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mymoe.py").write_text(
        "import dataclasses\n"
        "from workbench.moe.synth.arch.qwen3moe import ARCH as QWEN\n"
        "ARCH = dataclasses.replace(QWEN, name='mymoe', rank=9)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover([str(package)], "more_arches")
    assert list(found) == ["mymoe"]
    mine = found["mymoe"]
    plans = mine.plans(synth.spec_for("qwen3moe", "tiny"))
    assert any(p.per_expert for p in plans)  # what tensors: its experts among them
    assert dataclasses.replace(mine, name="x").attention_metadata is mine.attention_metadata
    sys.modules.pop("more_arches.mymoe", None)
    assert arch_package.ARCHITECTURES is ARCHITECTURES
