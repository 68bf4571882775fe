"""The project's build backend: setuptools', plus llama-cpp-python for a real wheel only.

A wheel's native library is linked to the libllama of the llama-cpp-python in pip's build
environment (setup.py), so building a wheel needs the pinned release there. An editable install
(set-up's `pip install -e .`) builds no native code, so it does not pay for installing it.
"""

from __future__ import annotations

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every hook not overridden below

# Keep equal to the pin in pyproject.toml and workbench/native_build.py.
_LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"


def get_requires_for_build_wheel(config_settings=None):  # type: ignore[no-untyped-def]
    return [*_setuptools.get_requires_for_build_wheel(config_settings), _LLAMA_CPP_PYTHON]
