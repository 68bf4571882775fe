"""`pip install .` as a user gets it: the wheel built from this checkout, installed into a fresh
virtualenv outside the repository, runs `workbench inspect` and an offscreen screenshot.

The wheel is built as `pip install .` builds it, in an isolated build environment whose
llama-cpp-python (the pinned release, from pip's wheel cache) is the one the native library is
linked to; the fresh venv gets the same cached wheel, so the identity handshake holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from workbench.native_build import LIB_NAME
from workbench.paths import REPO_ROOT


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd[:4]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _dependencies() -> list[str]:
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["dependencies"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, chat_model_path: Path) -> Path:
    """The scratch venv's bin/ with the wheel installed."""
    root = tmp_path_factory.mktemp("wheel")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    # The dependencies install (mostly unpacking) while the wheel compiles (mostly CPU); the
    # wheel's own install then finds them satisfied. Same pins as this venv, so llama-cpp-python
    # comes out of pip's wheel cache, not a compile.
    deps = subprocess.Popen([python, "-m", "pip", "install", "--quiet", *_dependencies()],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wheels = root / "dist"
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels),
              str(REPO_ROOT)], cwd=root)
    finally:
        out, _ = deps.communicate(timeout=900)
    assert deps.returncode == 0, out[-3000:]
    (wheel,) = wheels.glob("workbench-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert f"workbench/_native/{LIB_NAME}" in names
    assert "workbench/resources/templates/chatml.jinja" in names
    assert "linux_x86_64" in wheel.name  # a platform wheel: it carries a compiled library
    _run([python, "-m", "pip", "install", "--quiet", str(wheel)], cwd=root)
    return env_dir / "bin"


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(QT_QPA_PLATFORM="offscreen", WORKBENCH_DATA_DIR=str(tmp / "data"))
    env.pop("WORKBENCH_NATIVE_LIB", None)
    return env


@pytest.mark.slow
def test_the_installed_command_inspects_the_default_model(installed: Path, tmp_path: Path):
    proc = _run([str(installed / "workbench"), "inspect"], cwd=tmp_path, env=_clean_env(tmp_path))
    assert "SmolLM2-135M-Instruct" in proc.stdout
    assert "<|im_start|>" in proc.stdout  # the template, in full
    # It runs from site-packages, not from this checkout.
    where = _run([str(installed / "python"), "-c",
                  "import workbench, workbench.paths as p; print(workbench.__file__); "
                  "print(p.native_library_path()); print(p.resources_dir())"],
                 cwd=tmp_path, env=_clean_env(tmp_path)).stdout.split()
    site = installed.parent / "lib"
    assert all(Path(w).is_relative_to(site) for w in where), where
    assert Path(where[1]).exists() and Path(where[2]).is_dir()
    # The identity handshake: built for, and bound to, the libllama this venv's llama-cpp-python
    # loads (found through the library's $ORIGIN-relative rpath, not the build environment's).
    bound = _run([str(installed / "python"), "-c",
                  "from workbench.backend import native; lib = native.load(); "
                  "print(native.identity(lib).loaded_libllama_path)"],
                 cwd=tmp_path, env=_clean_env(tmp_path)).stdout.strip()
    assert Path(bound).is_relative_to(site) and "llama_cpp/lib" in bound


@pytest.mark.slow
def test_the_installed_window_chats_and_takes_a_screenshot(installed: Path, tmp_path: Path):
    shot = tmp_path / "shot.png"
    # A real chat through the native library (the identity handshake runs at its load) and Qt.
    proc = _run([str(installed / "workbench"), "screenshot", "-o", str(shot), "-n", "6",
                 "--width", "800", "--height", "500"], cwd=tmp_path, env=_clean_env(tmp_path))
    assert shot.stat().st_size > 10_000, proc.stdout
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
