"""Images in a conversation: what a message carries, how an image is checked before libmtmd
sees it, and how its positions appear in the KV mirror.

An image is its encoded bytes (PNG, JPEG, ...) and is known by their SHA-256. A message refers
to its images by that hash (`Message["images"]`, comma-separated), so a history stays a list of
string dicts; the bytes live once in the session's image table.

The KV mirror (kv_memory.py) holds one int per context position. An image's positions are
stood for by negative ids derived from its hash (`image_token_ids`): real tokens are never
negative, and the same image at the same place gives the same ids, so the common-prefix rule
that reuses text reuses the image too, and a different image diverges at its first position.
The ids fit int32 (the spill file's format); two different images could only be confused if
their hashes agreed in 31 bits *and* they sat at the same place in the prompt.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workbench.engine.metrics import UNMEASURED
from workbench.file_kind import not_regular

# Larger images are refused before decoding: stb_image would allocate width x height x 3 bytes
# (1.2 GB for 20000 x 20000) only for the projector to scale it down to a few hundred pixels.
MAX_SIDE = 8192
_INT31 = (1 << 31) - 1


class ImageInputError(ValueError):
    """An image cannot be used; the message says what happened and what to do."""


@dataclass(frozen=True, slots=True)
class ImageInput:
    data: bytes
    name: str = ""  # where it came from (a file name), for messages
    sha256: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.sha256:
            object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())

    @property
    def label(self) -> str:
        return self.name or f"image {self.sha256[:8]}"


def read_image(path: str | Path) -> ImageInput:
    """An image file's bytes, checked (exists, not empty, not too large, a known header)."""
    path = Path(path)
    if kind := not_regular(path):  # reading a FIFO would wait for a writer forever
        raise ImageInputError(f"the image {path} is {kind}, not an image file: attach a PNG, "
                              "JPEG or other image file")
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ImageInputError(f"the image {path} is gone (moved or deleted since it was "
                              "attached): attach it again") from exc
    except OSError as exc:
        raise ImageInputError(f"cannot read the image {path}: {exc.strerror}") from exc
    image = ImageInput(data, path.name)
    check_image(image)
    return image


def check_image(image: ImageInput) -> None:
    """Refuse what libmtmd should never be handed: empty data, or pixels past MAX_SIDE."""
    if not image.data:
        raise ImageInputError(f"{image.label} is empty (0 bytes): it is not an image")
    size = image_size(image.data)
    if size is not None and max(size) > MAX_SIDE:
        w, h = size
        raise ImageInputError(
            f"{image.label} is {w} × {h} px, more than the {MAX_SIDE} px per side this app "
            "decodes (the projector scales every image down to its own small input size "
            f"anyway): shrink it to at most {MAX_SIDE} px per side and attach it again")


# The formats an attachment is taken in (what the picker offers), by their first bytes.
ATTACHABLE = "PNG, JPEG, GIF, BMP or WebP"


def image_format(data: bytes) -> str | None:
    """"png", "jpeg", "gif", "bmp" or "webp" from the file's signature; None for anything else."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:2] == b"BM" and len(data) >= 26:
        return "bmp"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def read_attachment(path: str | Path) -> ImageInput:
    """`read_image`, and refused at once unless it is an image of a format we take: a text
    file attached by mistake is said so when attached, not by the model after Send."""
    image = read_image(path)
    if image_format(image.data) is None:
        raise ImageInputError(f"{image.label} is not an image (it is not {ATTACHABLE}): it was "
                              "not attached; choose an image file")
    return image


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, BMP, JPEG or WebP header; None when not recognised
    (libmtmd's loader then decides)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:2] == b"BM" and len(data) >= 26:
        w, h = struct.unpack("<ii", data[18:26])
        return abs(w), abs(h)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        kind = data[12:16]
        if kind == b"VP8X":
            return (int.from_bytes(data[24:27], "little") + 1,
                    int.from_bytes(data[27:30], "little") + 1)
        if kind == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if kind == b"VP8 ":
            w, h = struct.unpack("<HH", data[26:30])
            return w & 0x3FFF, h & 0x3FFF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return w, h
        i += 2 + length
    return None


def image_token_ids(sha256: str, n_pos: int) -> list[int]:
    """The KV mirror's stand-ins for an image's n_pos positions (negative, int32)."""
    base = int(sha256[:16], 16) % _INT31
    return [-1 - (base + i) % _INT31 for i in range(n_pos)]


def kv_cells(tokens: list[int], extra_cells: Mapping[int, int]) -> int:
    """KV cells that `tokens` (a prompt or the KV mirror) take: one per position, plus, for an
    image on an M-RoPE model, the embeddings beyond its positions. Such a model gives an image
    fewer positions than embeddings (a grid of w x h patches takes max(w, h) positions), but the
    KV needs a cell for every embedding. `extra_cells` maps an image's first stand-in id to its
    embeddings minus its positions (PromptBuilder.extra_cells); images without an entry take
    one cell per position."""
    if not extra_cells:
        return len(tokens)
    return len(tokens) + sum(extra_cells.get(t, 0) for t in tokens if t < 0)


def message_images(message: dict[str, str]) -> list[str]:
    """The hashes of the images a message carries, in order."""
    raw = message.get("images", "")
    return [h for h in raw.split(",") if h]


@dataclass(slots=True)
class ImageTurnStats:
    """What one turn did with images (unmeasured, -1, without a projector)."""

    n_images: int = -1  # images in the prompt
    n_encoded: int = -1  # of those, encoded this turn (the others were reused from the KV)
    image_tokens: int = -1  # embeddings decoded from the images encoded this turn
    encode_seconds: float = UNMEASURED  # vision encoder time of this turn (TTFT includes it)

    @classmethod
    def zero(cls) -> ImageTurnStats:
        return cls(0, 0, 0, 0.0)
