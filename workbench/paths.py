"""Where the workbench keeps things: one place, so tests and set-up agree."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "workbench"
LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # keep equal to the pin in pyproject.toml
REPO_ROOT = Path(__file__).resolve().parent.parent


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
    return REPO_ROOT / "build" / "native"
