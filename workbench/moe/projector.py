"""An image projector file (mmproj GGUF) read from its header, without loading it.

Used before libmtmd sees a file, so a wrong file gets a plain message (libmtmd's own is a log
line), and by `inspect`. Also: which projector sits beside a model (`find_beside`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gguf import GGUFReader

from workbench.file_kind import not_regular
from workbench.moe.layout import ModelFileError

GGUF_MAGIC = b"GGUF"
_FIX = "Choose the model's image projector: a file usually named mmproj-*.gguf beside the model."


@dataclass(frozen=True, slots=True)
class ProjectorFacts:
    path: Path
    projector_type: str  # clip.projector_type, e.g. "mlp", "gemma3", "qwen2.5vl_merger"
    image_size: int  # the encoder's input side in pixels (-1 when not stated)
    patch_size: int  # -1 when not stated
    projection_dim: int  # clip.vision.projection_dim (-1 when not stated)
    size_bytes: int

    @property
    def tokens_per_image(self) -> int:
        """Image tokens at the encoder's input size for a projector that maps one patch to one
        token (mlp, ldp...); -1 when the type merges or tiles (libmtmd then decides per image)."""
        if self.projector_type in ("mlp", "mlp_norm") and self.image_size > 0 < self.patch_size:
            return (self.image_size // self.patch_size) ** 2
        return -1


def read_projector_facts(path: str | Path) -> ProjectorFacts:
    """ModelFileError (what is wrong, what to do) unless `path` is a vision projector GGUF."""
    path = Path(path)
    if kind := not_regular(path):  # opening a FIFO would wait for a writer forever
        raise ModelFileError(f"the image projector {path} is {kind}, not a file. {_FIX}")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise ModelFileError(f"the image projector {path} does not exist. {_FIX}") from exc
    except OSError as exc:
        raise ModelFileError(f"cannot read the image projector {path}: {exc.strerror}") from exc
    if magic != GGUF_MAGIC:
        raise ModelFileError(f"{path.name} is not a GGUF file (it starts with {magic!r}), so "
                             f"it is not an image projector. {_FIX}")
    try:
        reader = GGUFReader(path, "r")
    except (ValueError, IndexError, OSError) as exc:
        raise ModelFileError(f"{path.name} is damaged or truncated ({exc}). Download it again. "
                             f"{_FIX}") from exc
    fields = reader.fields

    def text(key: str) -> str:
        f = fields.get(key)
        return bytes(f.parts[f.data[0]]).decode("utf-8", "replace") if f is not None else ""

    def number(key: str) -> int:
        f = fields.get(key)
        return int(f.parts[f.data[0]][0]) if f is not None else -1

    arch = text("general.architecture")
    kind = text("clip.projector_type") or text("clip.vision.projector_type")
    if arch != "clip" or not kind:
        what = f"a {arch} language model" if arch and arch != "clip" else "not a projector"
        raise ModelFileError(f"{path.name} is {what}, not an image projector (it has no "
                             f"clip.projector_type). {_FIX}")
    expected = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if expected > size:
        raise ModelFileError(f"{path.name} is truncated: its tensors need {expected} bytes but "
                             f"the file has {size}. Download it again.")
    return ProjectorFacts(path, kind, number("clip.vision.image_size"),
                          number("clip.vision.patch_size"), number("clip.vision.projection_dim"),
                          size)


def find_beside(model: str | Path) -> Path | None:
    """The projector in the model's folder (an mmproj*.gguf), when there is exactly one."""
    model = Path(model)
    found = sorted(p for p in model.parent.glob("mmproj*.gguf") if p.is_file())
    if len(found) == 1:
        return found[0]
    # Several (e.g. F16 and Q8_0): one named after the model wins, else none is guessed.
    stem = model.stem.lower()
    named = [p for p in found if stem.split("-")[0] in p.name.lower()]
    return named[0] if len(named) == 1 else None


def format_projector(facts: ProjectorFacts) -> str:
    per_image = facts.tokens_per_image
    return "\n".join([
        f"projector      {facts.path.name} ({facts.size_bytes / (1 << 20):.1f} MiB)",
        f"  type         {facts.projector_type}",
        f"  image size   {facts.image_size} px (patch {facts.patch_size} px)"
        if facts.image_size > 0 else "  image size   not stated",
        f"  tokens/image {per_image}" if per_image > 0
        else "  tokens/image decided per image by libmtmd (merging or tiling projector)",
        f"  output width {facts.projection_dim}" if facts.projection_dim > 0 else "",
    ]).rstrip()
