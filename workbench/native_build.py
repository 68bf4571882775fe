"""Building native/ against the pinned llama-cpp-python: shared by set-up and the wheel build.

Standard library only, and nothing of the package: `setup.py` imports this inside pip's isolated
build environment, where the project's own dependencies are not installed.

The native library is compiled against the headers of the pinned llama-cpp-python release's own
source distribution and linked to the libllama that release installed; its SHA-256 is baked in
and checked at start-up (backend/native.py). A source checkout links with an absolute rpath to
the venv's copy; a wheel links with `$ORIGIN/../../llama_cpp/lib`, where pip puts the same
release's libraries beside it in site-packages.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

Log = Callable[[str], None]

# Keep equal to the pin in pyproject.toml (dependencies and build-system requires).
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LIB_NAME = "libworkbench_native.so"
# From site-packages/workbench/_native/ to site-packages/llama_cpp/lib/.
WHEEL_RPATH = "$ORIGIN/../../llama_cpp/lib"

# Only these parts of the source distribution are needed: headers to compile against, the chat
# template corpus for tests, and the sources for reading.
_SDIST_MEMBERS = ("vendor/llama.cpp/include/", "vendor/llama.cpp/ggml/include/",
                  "vendor/llama.cpp/models/templates/", "vendor/llama.cpp/src/",
                  "vendor/llama.cpp/common/")


def ensure_sdist(target: Path, version: str, log: Log) -> Path:
    """Unpack the pinned llama-cpp-python sdist (headers, templates) into `target`, once."""
    done = target / ".unpacked"
    if done.exists():
        return target
    log(f"fetching the llama-cpp-python {version} source distribution")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--no-binary", ":all:", "-d", tmp, f"llama-cpp-python=={version}"],
            check=True,
        )
        archive = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        prefix = f"llama_cpp_python-{version}/"
        unpack = Path(tmp) / "unpack"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers()
                       if m.name.removeprefix(prefix).startswith(_SDIST_MEMBERS)]
            tar.extractall(unpack, members=members, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(unpack / prefix.rstrip("/")), target)
    done.touch()
    return target


def installed_libllama() -> Path:
    """The libllama that this interpreter's llama-cpp-python loads (found without importing it)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise RuntimeError("llama-cpp-python is not installed in this environment")
    lib = Path(spec.origin).parent / "lib" / "libllama.so"
    if not lib.exists():
        raise RuntimeError(f"llama-cpp-python is installed but {lib} is missing")
    return lib


def cmake_build(source: Path, build: Path, sdist: Path, libllama: Path, version: str,
                rpath: str | None = None) -> Path:
    """Configure and build native/ in `build`; returns the library. `rpath` defaults to
    libllama's directory (absolute: right for a source checkout's venv)."""
    headers = sdist / "vendor" / "llama.cpp"
    include_dirs = f"{headers / 'include'};{headers / 'ggml' / 'include'}"
    configure = ["cmake", "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                 f"-DLLAMA_INCLUDE_DIRS={include_dirs}", f"-DLLAMA_LIBRARY={libllama}",
                 f"-DLLAMA_CPP_PYTHON_VERSION={version}"]
    if rpath is not None:
        configure.append(f"-DWB_RPATH={rpath}")
    subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "-j"], check=True, stdout=subprocess.DEVNULL)
    return build / LIB_NAME
