"""Images on the command line, exactly as the issue asks: make-model --mmproj, then
chat --mmproj --image, as real subprocesses; inspect on a projector; the bad inputs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.engine.metrics_reader import read_metrics_csv
from workbench.moe.synth_mmproj import solid_png

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    # Run elsewhere than the repository (relative paths, as a user types them), so the tree
    # under test is named explicitly.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("vision")
    proc = _cli("make-model", "--arch", "qwen3moe", "--size", "tiny", "-o", "M.gguf",
                "--mmproj", "P.gguf", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    (folder / "red.png").write_bytes(solid_png(48, 40, (255, 0, 0)))
    return folder


def test_the_issue_command_works_and_reports_the_image(made):
    # Run in the module's folder with relative paths, exactly as written in the issue; the CSV
    # check is the same run with --csv added.
    proc = _cli("chat", "-m", "M.gguf", "--mmproj", "P.gguf", "--image", "red.png", "-p",
                "Describe", "-n", "8", "--csv", "run.csv", cwd=made)
    assert proc.returncode == 0, proc.stderr
    assert "images: 1 in the prompt, 1 encoded into 16 tokens in" in proc.stderr
    assert "TTFT include it" in proc.stderr
    metrics = read_metrics_csv(made / "run.csv")
    assert metrics.preamble["wb_mmproj"] == "P.gguf"
    assert metrics.settings["mmproj"] == "P.gguf"
    summary = metrics.summaries[0]
    assert (summary["images"], summary["images_encoded"], summary["image_tokens"]) == (1, 1, 16)
    assert summary["image_encode_s"] > 0


def test_the_projector_beside_the_model_is_found(made, tmp_path):
    shutil.copy(made / "M.gguf", tmp_path / "M.gguf")
    shutil.copy(made / "P.gguf", tmp_path / "mmproj-M.gguf")
    shutil.copy(made / "red.png", tmp_path / "red.png")
    proc = _cli("chat", "-m", "M.gguf", "--image", "red.png", "-p", "Describe", "-n", "4",
                "-c", "256", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "using the image projector beside the model: mmproj-M.gguf" in proc.stderr
    info = _cli("inspect", "M.gguf", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert "type         mlp" in info.stdout and "tokens/image 16" in info.stdout


def test_inspect_describes_a_projector(made):
    proc = _cli("inspect", "P.gguf", cwd=made)
    assert proc.returncode == 0, proc.stderr
    assert "type         mlp" in proc.stdout
    assert "image size   32 px (patch 8 px)" in proc.stdout
    assert "tokens/image 16" in proc.stdout and "output width 128" in proc.stdout


@pytest.mark.parametrize(("args", "says"), [
    (("--mmproj", "P.gguf", "--image", "gone.png"), "is gone"),
    (("--image", "red.png"), "needs the model's image projector"),
    (("--mmproj", "M.gguf", "--image", "red.png"), "not an image projector"),
])
def test_bad_image_input_is_one_clear_error(made, args, says):
    proc = _cli("chat", "-m", "M.gguf", *args, "-p", "Describe", "-n", "4", "-c", "256",
                cwd=made)
    assert proc.returncode == 1
    assert says in proc.stderr and "Traceback" not in proc.stderr
