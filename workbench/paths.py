"""Where the workbench keeps things: one place, so tests and set-up agree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

from workbench.native_build import LIB_NAME as NATIVE_LIB_NAME
from workbench.native_build import LLAMA_CPP_PYTHON_VERSION

APP_NAME = "workbench"
# In a source checkout this is the repository; in an installed wheel or a bundle it is merely the
# directory holding the package, so nothing below may assume more than `package_dir()`.
REPO_ROOT = Path(__file__).resolve().parent.parent


def package_dir() -> Path:
    """The `workbench` package itself (site-packages/workbench, or the checkout's workbench/)."""
    return Path(__file__).resolve().parent


def cache_dir() -> Path:
    """Per-user cache (models assembled from PyPI, the pinned sdist's headers)."""
    override = os.environ.get("WORKBENCH_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir(APP_NAME))


def data_dir() -> Path:
    """Per-user data (conversations, runs, presets)."""
    override = os.environ.get("WORKBENCH_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME))


def sdist_dir() -> Path:
    """The pinned llama-cpp-python source distribution, unpacked by set-up."""
    return cache_dir() / "sdist" / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"


def llama_templates_dir() -> Path:
    """Chat templates that ship with the pinned llama.cpp release (`models/templates/`)."""
    return sdist_dir() / "vendor" / "llama.cpp" / "models" / "templates"


def native_build_dir() -> Path:
    """Where set-up builds the native library in a source checkout: one per virtual
    environment (`build/native` for `.venv`, `build/native-3.12` for the `.venv-3.12` that
    `scripts/test --python 3.12` makes), since each build is linked to, and checks, the
    libllama of its own environment's llama-cpp-python."""
    venv = Path(sys.prefix).name
    suffix = venv.removeprefix(".venv") if venv.startswith(".venv") else ""
    return REPO_ROOT / "build" / f"native{suffix}"


def native_library_path() -> Path:
    """The native library: the copy the wheel build put in the package, else the checkout's build.

    An installed package (a wheel, a desktop bundle) carries it in `workbench/_native/`; a source
    checkout (an editable install included) has none there and uses what set-up built.
    """
    packaged = package_dir() / "_native" / NATIVE_LIB_NAME
    return packaged if packaged.exists() else native_build_dir() / NATIVE_LIB_NAME


def resources_dir() -> Path:
    """Templates and prompts: package data when installed, the checkout's resources/ otherwise."""
    packaged = package_dir() / "resources"
    return packaged if packaged.is_dir() else REPO_ROOT / "resources"
