"""Set-up steps that run inside the project's virtual environment (called by scripts/bootstrap.py).

Each step is idempotent and keyed by its inputs: re-running with nothing changed is fast.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from workbench.embedded import chat_model_path, gemma_model_path
from workbench.paths import LLAMA_CPP_PYTHON_VERSION, REPO_ROOT, native_build_dir, sdist_dir

Log = Callable[[str], None]

# Only these parts of the source distribution are needed: headers to compile against, the chat
# template corpus for tests, and the sources for reading.
_SDIST_MEMBERS = ("vendor/llama.cpp/include/", "vendor/llama.cpp/ggml/include/",
                  "vendor/llama.cpp/models/templates/", "vendor/llama.cpp/src/",
                  "vendor/llama.cpp/common/")


def ensure_sdist(log: Log) -> Path:
    """Unpack the pinned llama-cpp-python sdist (headers, templates) into the user cache."""
    target = sdist_dir()
    done = target / ".unpacked"
    if done.exists():
        return target
    log(f"fetching the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} source distribution")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--no-binary", ":all:", "-d", tmp,
             f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"],
            check=True,
        )
        archive = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/"
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
    """The libllama that the installed llama-cpp-python loads (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise RuntimeError("llama-cpp-python is not installed in this environment")
    lib = Path(spec.origin).parent / "lib" / "libllama.so"
    if not lib.exists():
        raise RuntimeError(f"llama-cpp-python is installed but {lib} is missing")
    return lib


def native_library_path() -> Path:
    return native_build_dir() / "libworkbench_native.so"


def ensure_native(log: Log) -> Path:
    """Build native/ against the sdist headers and the installed libllama, when inputs changed."""
    headers = ensure_sdist(log) / "vendor" / "llama.cpp"
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
    include_dirs = f"{headers / 'include'};{headers / 'ggml' / 'include'}"
    subprocess.run(
        ["cmake", "-S", str(REPO_ROOT / "native"), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
         f"-DLLAMA_INCLUDE_DIRS={include_dirs}", f"-DLLAMA_LIBRARY={libllama}",
         f"-DLLAMA_CPP_PYTHON_VERSION={LLAMA_CPP_PYTHON_VERSION}"],
        check=True, stdout=subprocess.DEVNULL,
    )
    subprocess.run(["cmake", "--build", str(build), "-j"], check=True, stdout=subprocess.DEVNULL)
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
