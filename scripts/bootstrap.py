#!/usr/bin/env python3
"""Set the workbench up on this machine, idempotently, with nothing but Python's standard library.

Stage 1 (system Python): create `.venv` and install the project into it. llama-cpp-python has no
Linux wheels, so the first install compiles llama.cpp (minutes); pip keeps the built wheel in its
cache, so a fresh clone on the same machine reinstalls it in seconds.
Stage 2 (the venv's Python): unpack the pinned llama-cpp-python source distribution's headers
into the user cache, build `native/` against them, and assemble the embedded default model.
Every step leaves a stamp keyed by its inputs, so a re-run with nothing changed takes a second.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# `scripts/test --python 3.12` sets up a second environment beside `.venv` (WORKBENCH_VENV),
# made by the Python that runs this script.
VENV = Path(os.environ.get("WORKBENCH_VENV") or REPO / ".venv")
VENV_PYTHON = VENV / "bin" / "python"


def log(message: str) -> None:
    print(f"[setup] {message}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kwargs: object) -> None:
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()[:16]


def stage1() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - run by whatever python3 the machine has
        sys.exit("the workbench needs Python 3.11 or newer")
    if not VENV_PYTHON.exists():
        log(f"creating {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / f".deps-{digest((REPO / 'pyproject.toml').read_bytes())}"
    if not stamp.exists():
        log("installing dependencies (the first time compiles llama.cpp: several minutes)")
        env = dict(os.environ)
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        run([str(VENV_PYTHON), "-m", "pip", "install", "--quiet", "-e", f"{REPO}[test]"], env=env)
        for old in VENV.glob(".deps-*"):
            old.unlink()
        stamp.touch()
    run([str(VENV_PYTHON), str(Path(__file__).resolve()), "--stage2"])


def stage2() -> None:
    sys.path.insert(0, str(REPO))
    from workbench.setup_env import ensure_all

    ensure_all(log)


if __name__ == "__main__":
    if "--stage2" in sys.argv:
        stage2()
    else:
        stage1()
