"""The wheel build's one hook: compile native/ into the package and ship resources/ inside it.

Why a setuptools hook and not scikit-build-core: the editable install that set-up makes
(`pip install -e .`) must stay a plain Python install: set-up builds native/ itself, keyed by its
inputs, into build/native, and a CMake backend would compile it again on every editable
install and put it outside the tree. Here only a real wheel (`pip install .`, `pip wheel .`)
builds it. What the build needs to know (where the build environment's libllama is, the pinned
sdist's headers) is Python logic shared with set-up in workbench/native_build.py.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from workbench import native_build  # noqa: E402 - standard library only, by design

LLAMA_CPP_PYTHON_VERSION = native_build.LLAMA_CPP_PYTHON_VERSION


def _log(message: str) -> None:
    print(f"[workbench build] {message}", file=sys.stderr, flush=True)


def _sdist_cache() -> Path:
    """The same place set-up unpacks the sdist (platformdirs' Linux cache dir), so a machine
    that ran set-up builds wheels offline."""
    base = os.environ.get("WORKBENCH_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workbench")
    return Path(base) / "sdist" / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"


class BuildPyWithNative(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # a source checkout uses set-up's build/native and the repository's resources/
        package = Path(self.build_lib) / "workbench"
        shutil.copytree(ROOT / "resources", package / "resources", dirs_exist_ok=True)
        # The libllama of the llama-cpp-python installed in *this* build environment: pip installs
        # the same pinned release (from its wheel cache) beside the wheel, so the SHA-256 baked in
        # matches the copy the program runs with.
        libllama = native_build.installed_libllama()
        sdist = native_build.ensure_sdist(_sdist_cache(), LLAMA_CPP_PYTHON_VERSION, _log)
        _log(f"building the native library against {libllama}")
        with tempfile.TemporaryDirectory(prefix="workbench-native-") as tmp:
            lib = native_build.cmake_build(ROOT / "native", Path(tmp), sdist, libllama,
                                           LLAMA_CPP_PYTHON_VERSION, rpath=native_build.WHEEL_RPATH)
            (package / "_native").mkdir(exist_ok=True)
            shutil.copy2(lib, package / "_native" / native_build.LIB_NAME)


class PlatformDistribution(Distribution):
    """The wheel carries a compiled library: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self) -> bool:
        return True


def _scratch_build_base() -> str:
    """setuptools' build tree, outside the checkout: the checkout's build/ is set-up's (and may
    be shared), and a build/lib left from an earlier wheel would carry deleted modules along."""
    base = tempfile.mkdtemp(prefix="workbench-wheel-build-")
    atexit.register(shutil.rmtree, base, True)
    return base


setup(cmdclass={"build_py": BuildPyWithNative}, distclass=PlatformDistribution,
      options={"build": {"build_base": _scratch_build_base()}})
