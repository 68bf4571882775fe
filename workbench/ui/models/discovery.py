"""GGUF models already on this machine: the folders of the apps people use to fetch them, plus
folders the user adds (Qt-free; the picker runs `scan` off the UI thread).

Default folders on Linux, and where each was found:
- LM Studio: ~/.lmstudio/models ("defaultModelsFolder = {home}/models", home ~/.lmstudio:
  lmstudio-ai/lms src/lmstudioPaths.ts; LM Studio docs, "My Models" import), and the older
  ~/.cache/lm-studio/models.
- GPT4All: $XDG_DATA_HOME/nomic.ai/GPT4All, i.e. ~/.local/share/nomic.ai/GPT4All (the chat
  app's models path is Qt's AppLocalDataLocation; GPT4All's own docs say to put a .gguf there).
- Jan: $XDG_CONFIG_HOME/Jan/data/models, i.e. ~/.config/Jan/data/models (jan.ai/docs/data-folder:
  "Linux: ~/.config/Jan/data # Default install"); the models sit in folders below it
  (models/llamacpp/<model>/...). Older releases used ~/jan/models.
- Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
  else ~/.cache/huggingface/hub (huggingface_hub's constants); files are symlinks in
  models--org--name/snapshots/<rev>/ to blobs/, so a file is known by where it resolves.
- llama.cpp's cache (`-hf` downloads): $LLAMA_CACHE, else $XDG_CACHE_HOME/llama.cpp, else
  ~/.cache/llama.cpp (fs_get_cache_directory() in llama.cpp's common/common.cpp, read in the
  pinned release's sources).

A missing or unreadable folder is skipped without a word; a file whose header cannot be read
is listed with the reason it cannot load. A split model is listed once, by its first shard;
`mmproj*.gguf` files are vision projectors, paired with the model beside them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.atomic_write import write_text_atomic
from workbench.file_kind import read_text
from workbench.moe.layout import ModelFacts, ModelFileError, read_model_facts

MAX_DEPTH = 6  # below a source folder: HF's models--x/snapshots/rev/file is 3, Jan's 3
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Source:
    name: str  # "LM Studio", "your folder"
    path: Path


@dataclass(frozen=True, slots=True)
class FoundModel:
    path: Path  # the file to load (a split model's first shard)
    source: str
    facts: ModelFacts | None  # None when the header could not be read
    problem: str = ""  # why it cannot load ("" when it can)
    projector: Path | None = None  # the vision projector beside it, if any

    @property
    def label(self) -> str:
        if self.problem:
            return f"{self.path.name} ({self.source}): cannot load"
        return f"{self.path.name} ({self.source})"


def _env_dir(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name, "")
    return Path(value) if value else None


def default_sources(env: Mapping[str, str] | None = None, home: Path | None = None
                    ) -> list[Source]:
    env = os.environ if env is None else env
    home = home or Path(env.get("HOME") or Path.home())
    data = _env_dir(env, "XDG_DATA_HOME") or home / ".local" / "share"
    config = _env_dir(env, "XDG_CONFIG_HOME") or home / ".config"
    cache = _env_dir(env, "XDG_CACHE_HOME") or home / ".cache"
    hf_home = _env_dir(env, "HF_HOME")
    hub = _env_dir(env, "HF_HUB_CACHE") or (hf_home / "hub" if hf_home else
                                             cache / "huggingface" / "hub")
    return [
        Source("LM Studio", home / ".lmstudio" / "models"),
        Source("LM Studio", cache / "lm-studio" / "models"),
        Source("GPT4All", data / "nomic.ai" / "GPT4All"),
        Source("Jan", config / "Jan" / "data" / "models"),
        Source("Jan", home / "jan" / "models"),
        Source("Hugging Face", hub),
        Source("llama.cpp", _env_dir(env, "LLAMA_CACHE") or cache / "llama.cpp"),
    ]


def _gguf_files(root: Path) -> Iterable[Path]:
    """Every *.gguf under `root` (depth-limited, symlinked folders not followed: a link loop
    must not hang the scan); unreadable parts are skipped."""
    base = len(root.parts)
    for folder, dirs, files in os.walk(root, onerror=lambda _: None):
        if len(Path(folder).parts) - base >= MAX_DEPTH:
            dirs.clear()
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.lower().endswith(".gguf") and not name.startswith("."):
                yield Path(folder) / name


def is_projector(path: Path) -> bool:
    return path.name.lower().startswith("mmproj")


def candidates(sources: Iterable[Source]) -> list[tuple[Path, str, Path | None]]:
    """(model file, source name, projector) for every model, each file once."""
    seen: set[Path] = set()
    out: list[tuple[Path, str, Path | None]] = []
    for source in sources:
        try:
            if not source.path.is_dir():
                continue
        except OSError:
            continue
        projectors: dict[Path, list[Path]] = {}
        models: list[Path] = []
        for path in _gguf_files(source.path):
            try:
                real = path.resolve()
            except OSError:
                continue
            if real in seen:
                continue
            seen.add(real)
            if is_projector(path):
                projectors.setdefault(path.parent, []).append(path)
                continue
            m = _SHARD.match(path.name)
            if m is not None and int(m["index"]) != 1:
                continue  # a later shard: the first one stands for the model
            models.append(path)
        for model in models:
            beside = projectors.get(model.parent, [])
            out.append((model, source.name, _best_projector(model, beside)))
    return out


def _best_projector(model: Path, projectors: list[Path]) -> Path | None:
    """The projector beside `model`: the only one, or the one whose name shares most with it
    (a folder holding two models and their projectors)."""
    if len(projectors) <= 1:
        return projectors[0] if projectors else None
    stem = model.stem.lower()

    def shared(p: Path) -> int:
        name = p.stem.lower().removeprefix("mmproj").strip("-_.")
        return max((n for n in range(len(name), 0, -1) if name[:n] in stem), default=0)

    return max(projectors, key=shared)


def scan(sources: Iterable[Source], on_progress: Callable[[int, int], None] | None = None,
         cancelled: Callable[[], bool] = lambda: False) -> list[FoundModel]:
    """Read every candidate's header; a file that fails is listed with its reason."""
    found = candidates(sources)
    out: list[FoundModel] = []
    for i, (path, source, projector) in enumerate(found):
        if cancelled():
            break
        try:
            out.append(FoundModel(path, source, read_model_facts(path), projector=projector))
        except ModelFileError as exc:
            out.append(FoundModel(path, source, None, str(exc), projector))
        except OSError as exc:  # vanished or unreadable between the walk and the read
            out.append(FoundModel(path, source, None, f"{path.name} cannot be read: "
                                  f"{exc.strerror or exc}", projector))
        if on_progress is not None:
            on_progress(i + 1, len(found))
    return out


# ---- folders the user adds -------------------------------------------------------------------

def folders_file(data: Path) -> Path:
    return data / "model_folders.json"


def load_folders(data: Path) -> list[Path]:
    try:
        items = json.loads(read_text(folders_file(data)))
    except (OSError, ValueError):
        return []
    return [Path(p) for p in items if isinstance(p, str)] if isinstance(items, list) else []


def add_folder(data: Path, folder: Path) -> list[Path]:
    """Remember `folder` (first); raises OutputFileError when the list cannot be written."""
    folders = [folder, *[f for f in load_folders(data) if f != folder]]
    data.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folders_file(data), json.dumps([str(f) for f in folders], indent=1))
    return folders


def all_sources(data: Path, env: Mapping[str, str] | None = None) -> list[Source]:
    return [*(Source("your folder", f) for f in load_folders(data)), *default_sources(env)]
