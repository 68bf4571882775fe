"""Models found where they already are: real GGUF files in the apps' default folders under a
temporary HOME (XDG and HF variables set or cleared), split models once, projectors paired,
bad files listed with their reason, missing or unreadable folders skipped."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from workbench.moe.synth import write_synthetic_moe
from workbench.ui.models import discovery
from workbench.ui.models.discovery import Source, add_folder, all_sources, default_sources, scan


@pytest.fixture(scope="module")
def one_model(tmp_path_factory) -> Path:
    return write_synthetic_moe(tmp_path_factory.mktemp("m") / "tiny.gguf", size="tiny")[0]


@pytest.fixture(scope="module")
def split_model(tmp_path_factory) -> list[Path]:
    shards = write_synthetic_moe(tmp_path_factory.mktemp("s") / "split.gguf", size="tiny",
                                 split_max_tensors=20)
    assert len(shards) > 1
    return shards


def test_the_default_folders_follow_home_and_the_xdg_and_hf_variables(tmp_path):
    home = tmp_path / "h"
    plain = {s.name: s.path for s in reversed(default_sources({"HOME": str(home)}))}
    assert plain["LM Studio"] == home / ".lmstudio/models"
    assert plain["GPT4All"] == home / ".local/share/nomic.ai/GPT4All"
    assert plain["Jan"] == home / ".config/Jan/data/models"
    assert plain["Hugging Face"] == home / ".cache/huggingface/hub"
    assert plain["llama.cpp"] == home / ".cache/llama.cpp"
    env = {"HOME": str(home), "XDG_DATA_HOME": "/d", "XDG_CONFIG_HOME": "/c",
           "XDG_CACHE_HOME": "/k", "LLAMA_CACHE": "/l", "HF_HOME": "/hf"}
    moved = {s.name: s.path for s in reversed(default_sources(env))}
    assert moved["GPT4All"] == Path("/d/nomic.ai/GPT4All")
    assert moved["Jan"] == Path("/c/Jan/data/models")
    assert moved["Hugging Face"] == Path("/hf/hub")
    assert moved["llama.cpp"] == Path("/l")
    assert {s.name: s.path for s in default_sources({**env, "HF_HUB_CACHE": "/x"})}[
        "Hugging Face"] == Path("/x")


def test_models_in_every_apps_folder_are_found_once(tmp_path, one_model, split_model):
    home = tmp_path / "home"
    lm = home / ".lmstudio/models/org/repo"
    jan = home / ".config/Jan/data/models/llamacpp/vision-model"
    hub = home / ".cache/huggingface/hub/models--org--repo"
    llama = home / ".cache/llama.cpp"
    for d in (lm, jan, hub / "blobs", hub / "snapshots/abc", llama):
        d.mkdir(parents=True)
    shutil.copy(one_model, lm / "model-Q4.gguf")
    for shard in split_model:
        shutil.copy(shard, llama / shard.name)
    shutil.copy(one_model, jan / "vision-model-q4.gguf")
    shutil.copy(one_model, jan / "mmproj-vision-model-f16.gguf")
    shutil.copy(one_model, hub / "blobs/0123abcd")
    os.symlink(hub / "blobs/0123abcd", hub / "snapshots/abc/repo-Q8_0.gguf")
    (llama / "broken.gguf").write_bytes(b"GGUF" + b"\x00" * 12)
    progress: list[tuple[int, int]] = []
    found = scan(default_sources({"HOME": str(home)}), on_progress=lambda *p: progress.append(p))
    by_name = {f.path.name: f for f in found}
    assert set(by_name) == {"model-Q4.gguf", split_model[0].name, "vision-model-q4.gguf",
                            "repo-Q8_0.gguf", "broken.gguf"}  # one entry per model
    assert by_name["model-Q4.gguf"].source == "LM Studio"
    split = by_name[split_model[0].name]
    assert split.problem == "" and split.facts.n_shards == len(split_model)
    assert by_name["vision-model-q4.gguf"].projector == jan / "mmproj-vision-model-f16.gguf"
    assert by_name["repo-Q8_0.gguf"].source == "Hugging Face" and by_name["repo-Q8_0.gguf"].facts
    bad = by_name["broken.gguf"]
    assert bad.facts is None and bad.problem and "cannot load" in bad.label
    assert progress[-1] == (5, 5) and [p[0] for p in progress] == [1, 2, 3, 4, 5]
    assert all(f.facts.tensor_bytes > 0 for f in found if f.facts)  # the estimate's input


def test_missing_and_unreadable_folders_are_skipped_silently(tmp_path, one_model):
    locked = tmp_path / "locked"
    (locked / "inner").mkdir(parents=True)
    shutil.copy(one_model, locked / "inner/a.gguf")
    ok = tmp_path / "ok"
    ok.mkdir()
    shutil.copy(one_model, ok / "b.gguf")
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):  # root reads anyway: make it a file where a folder was
            locked.chmod(0o700)
            shutil.rmtree(locked)
            locked.write_text("not a folder")
        found = scan([Source("gone", tmp_path / "nowhere"), Source("locked", locked),
                      Source("ok", ok)])
    finally:
        if locked.is_dir():
            locked.chmod(0o700)
    assert [f.path.name for f in found] == ["b.gguf"]


def test_a_link_loop_does_not_hang_the_scan(tmp_path, one_model):
    root = tmp_path / "r"
    root.mkdir()
    shutil.copy(one_model, root / "m.gguf")
    os.symlink(root, root / "loop")
    assert [f.path.name for f in scan([Source("r", root)])] == ["m.gguf"]


def test_folders_the_user_adds_are_remembered_and_scanned_first(tmp_path, one_model):
    data, mine = tmp_path / "data", tmp_path / "mine"
    mine.mkdir()
    shutil.copy(one_model, mine / "own.gguf")
    add_folder(data, mine)
    add_folder(data, mine)  # once
    sources = all_sources(data, {"HOME": str(tmp_path / "empty-home")})
    assert sources[0] == Source("your folder", mine)
    assert [s.path for s in sources].count(mine) == 1
    assert [f.path.name for f in scan(sources)] == ["own.gguf"]
    discovery.folders_file(data).write_text("{broken")
    assert discovery.load_folders(data) == []  # a damaged list is an empty one
