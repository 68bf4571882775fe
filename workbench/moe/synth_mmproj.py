"""A synthetic image projector (mmproj GGUF) with random weights, for tests without a download.

No small vision model ships on the package index, so this writes the smallest projector libmtmd
loads: projector type "mlp" (LLaVA-1.5's: a CLIP ViT, then two linear layers with GELU between),
a 32 x 32 px input in 8 px patches (16 image tokens per image), two ViT blocks of width 64. Its
output width is the language model's n_embd, so its embeddings can be decoded by that model.
Its "vision" is noise; the tests use it for the mechanics (load, tokenize, encode, decode, KV
reuse, cancel), never for what the model says.

Only numpy and the `gguf` package: no llama.cpp import here.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from workbench.atomic_write import StagedFiles

PROJECTOR_TYPE = "mlp"


@dataclass(frozen=True)
class ProjectorSpec:
    n_embd_out: int = 128  # the language model's n_embd (the synthetic tiny model's)
    image_size: int = 32
    patch_size: int = 8
    n_embd: int = 64  # the vision tower's width
    n_ff: int = 128
    n_layer: int = 2
    n_head: int = 4

    @property
    def tokens_per_image(self) -> int:
        return (self.image_size // self.patch_size) ** 2


def write_projector(path: str | Path, spec: ProjectorSpec = ProjectorSpec(), seed: int = 0
                    ) -> Path:
    """Write the projector; the file appears whole or not at all (OutputFileError)."""
    if spec.image_size % spec.patch_size or spec.n_embd % spec.n_head or spec.n_embd_out < 1:
        raise ValueError(f"an impossible projector shape: {spec}")
    with StagedFiles(path) as stage:
        w = GGUFWriter(stage.target, "clip")
        _metadata(w, spec)
        for name, array in _tensors(spec, seed):
            w.add_tensor(name, array)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return stage.commit([Path(stage.target)])[0]


def _metadata(w: GGUFWriter, spec: ProjectorSpec) -> None:
    w.add_name("workbench-synthetic-mmproj")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", PROJECTOR_TYPE)
    w.add_bool("clip.use_gelu", True)
    v = "clip.vision"
    w.add_uint32(f"{v}.image_size", spec.image_size)
    w.add_uint32(f"{v}.patch_size", spec.patch_size)
    w.add_uint32(f"{v}.embedding_length", spec.n_embd)
    w.add_uint32(f"{v}.feed_forward_length", spec.n_ff)
    w.add_uint32(f"{v}.projection_dim", spec.n_embd_out)
    w.add_uint32(f"{v}.attention.head_count", spec.n_head)
    w.add_float32(f"{v}.attention.layer_norm_epsilon", 1e-5)
    w.add_uint32(f"{v}.block_count", spec.n_layer)
    w.add_array(f"{v}.image_mean", [0.5, 0.5, 0.5])
    w.add_array(f"{v}.image_std", [0.5, 0.5, 0.5])


def _tensors(spec: ProjectorSpec, seed: int) -> list[tuple[str, np.ndarray]]:
    d, ff, p, out = spec.n_embd, spec.n_ff, spec.patch_size, spec.n_embd_out
    n_pos = spec.tokens_per_image + 1  # the patches and the class embedding

    def rand(name: str, shape: tuple[int, ...], std: float) -> tuple[str, np.ndarray]:
        # Each tensor its own generator: the file is byte-identical for a seed.
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        return name, (rng.standard_normal(shape) * std).astype(np.float32)

    def const(name: str, shape: tuple[int, ...], value: float) -> tuple[str, np.ndarray]:
        return name, np.full(shape, value, dtype=np.float32)

    tensors = [
        # numpy shapes are ggml's reversed: patch_embd is ggml [p, p, 3, d].
        rand("v.patch_embd.weight", (d, 3, p, p), 1.0 / np.sqrt(3 * p * p)),
        rand("v.class_embd", (d,), 0.02),
        rand("v.position_embd.weight", (n_pos, d), 0.02),
        const("v.pre_ln.weight", (d,), 1.0), const("v.pre_ln.bias", (d,), 0.0),
    ]
    for il in range(spec.n_layer):
        b = f"v.blk.{il}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensors += [rand(f"{b}.{name}.weight", (d, d), 1.0 / np.sqrt(d)),
                        const(f"{b}.{name}.bias", (d,), 0.0)]
        for name in ("ln1", "ln2"):
            tensors += [const(f"{b}.{name}.weight", (d,), 1.0),
                        const(f"{b}.{name}.bias", (d,), 0.0)]
        tensors += [rand(f"{b}.ffn_up.weight", (ff, d), 1.0 / np.sqrt(d)),
                    const(f"{b}.ffn_up.bias", (ff,), 0.0),
                    rand(f"{b}.ffn_down.weight", (d, ff), 1.0 / np.sqrt(ff)),
                    const(f"{b}.ffn_down.bias", (d,), 0.0)]
    # The projector: embeddings of about unit scale, like the language model's token rows.
    tensors += [rand("mm.0.weight", (out, d), 1.0 / np.sqrt(d)), const("mm.0.bias", (out,), 0.0),
                rand("mm.2.weight", (out, out), 1.0 / np.sqrt(out)),
                const("mm.2.bias", (out,), 0.0)]
    return tensors


def solid_png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A PNG of one colour (test images and the screenshot's, without an image library)."""
    row = b"\x00" + bytes(rgb) * width  # filter byte 0, then the pixels
    raw = row * height

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))
