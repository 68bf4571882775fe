"""Set-up steps that run inside the project's virtual environment (called by scripts/bootstrap.py).

Each step is idempotent and keyed by its inputs: re-running with nothing changed is fast.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from workbench import native_build
from workbench.embedded import chat_model_path, gemma_model_path
from workbench.paths import LLAMA_CPP_PYTHON_VERSION, REPO_ROOT, native_build_dir, sdist_dir

Log = Callable[[str], None]


def ensure_sdist(log: Log) -> Path:
    """Unpack the pinned llama-cpp-python sdist (headers, templates) into the user cache."""
    return native_build.ensure_sdist(sdist_dir(), LLAMA_CPP_PYTHON_VERSION, log)


def installed_libllama() -> Path:
    """The libllama that the installed llama-cpp-python loads (found without importing it)."""
    return native_build.installed_libllama()


def native_library_path() -> Path:
    return native_build_dir() / native_build.LIB_NAME


def ensure_native(log: Log) -> Path:
    """Build native/ against the sdist headers and the installed libllama, when inputs changed."""
    sdist = ensure_sdist(log)
    libllama = installed_libllama()
    key = hashlib.sha256()
    for part in (_tree_bytes(REPO_ROOT / "native"), libllama.read_bytes(),
                 LLAMA_CPP_PYTHON_VERSION.encode()):
        key.update(hashlib.sha256(part).digest())
    build = native_build_dir()
    stamp = build / f".built-{key.hexdigest()[:16]}"
    if stamp.exists() and native_library_path().exists():
        return native_library_path()
    log("building the native library")
    native_build.cmake_build(REPO_ROOT / "native", build, sdist, libllama,
                             LLAMA_CPP_PYTHON_VERSION)
    for old in build.glob(".built-*"):
        old.unlink()
    stamp.touch()
    return native_library_path()


def _tree_bytes(root: Path) -> bytes:
    chunks = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        chunks.append(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return b"\0".join(chunks)


def ensure_all(log: Log) -> None:
    ensure_native(log)
    path = chat_model_path()
    gemma = gemma_model_path()  # the tests' and benchmarks' model
    log(f"ready: native library {native_library_path().name}, default model {path.name}, "
        f"test model {gemma.name}")
