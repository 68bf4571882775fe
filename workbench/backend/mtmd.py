"""The libmtmd seam: a projector (mmproj GGUF) that turns images into embeddings for a context.

The sibling of `backend/llama.py` and, with it, the only importer of `llama_cpp` (the import
contract in pyproject.toml names both). llama-cpp-python 0.3.36 builds libmtmd and binds it in
`llama_cpp.mtmd_cpp`; this module keeps those calls narrow, typed and explicitly owned: every
native object has an idempotent `close()`.

One image chunk is evaluated in two steps so that each can be timed and cancelled apart:
`encode()` runs the vision tower and projector (libmtmd's own compute graph, which llama.cpp's
abort callback does not reach, so it is uninterruptible), then `decode_image()` feeds the
embeddings to the language model with `llama_decode` in n_batch pieces, where the abort flag works.
"""

from __future__ import annotations

import ctypes
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import llama_cpp.llama_cpp as ll
import llama_cpp.mtmd_cpp as mt

from workbench.backend import llama

log = logging.getLogger("workbench.mtmd")

CHUNK_TEXT = 0
CHUNK_IMAGE = 1


class ProjectorError(RuntimeError):
    """The projector could not be loaded or used; the message says what and what to do."""


class ImageError(RuntimeError):
    """An image could not be read by libmtmd's loader; the message says what and what to do."""


def default_marker() -> str:
    """The text a prompt carries where an image goes (libmtmd splits the prompt there)."""
    return mt.mtmd_default_marker().decode()


@dataclass(slots=True)
class Chunk:
    """One piece of a tokenized multimodal prompt: text tokens, or one image's positions."""

    kind: int  # CHUNK_TEXT or CHUNK_IMAGE
    tokens: list[int]  # text tokens (empty for an image)
    n_tokens: int  # embeddings an image yields (== len(tokens) for text)
    n_pos: int  # positions it takes in the context
    image_id: str  # the id the bitmap was given (its content hash); "" for text
    ptr: int  # the mtmd_input_chunk, owned by the Chunks it came from


class Chunks:
    """An mtmd_input_chunks list and its chunks as Python records; close() frees it."""

    def __init__(self, ptr: int) -> None:
        self.ptr: int | None = ptr
        self.items: list[Chunk] = []
        for i in range(int(mt.mtmd_input_chunks_size(ptr))):
            ch = mt.mtmd_input_chunks_get(ptr, i)
            kind = int(mt.mtmd_input_chunk_get_type(ch))
            n_pos = int(mt.mtmd_input_chunk_get_n_pos(ch))
            if kind == CHUNK_TEXT:
                n = ctypes.c_size_t(0)
                arr = mt.mtmd_input_chunk_get_tokens_text(ch, ctypes.byref(n))
                tokens = [int(arr[j]) for j in range(n.value)]
                self.items.append(Chunk(kind, tokens, len(tokens), n_pos, "", ch))
            else:
                raw = mt.mtmd_input_chunk_get_id(ch)
                n_tok = int(mt.mtmd_input_chunk_get_n_tokens(ch))
                self.items.append(Chunk(kind, [], n_tok, n_pos, raw.decode() if raw else "", ch))

    def close(self) -> None:
        if self.ptr:
            mt.mtmd_input_chunks_free(self.ptr)
            self.ptr = None
            self.items = []


class Bitmap:
    """A decoded image (RGB pixels) with the id its chunks will carry."""

    def __init__(self, ptr: int) -> None:
        self.ptr: int | None = ptr
        self.width = int(mt.mtmd_bitmap_get_nx(ptr))
        self.height = int(mt.mtmd_bitmap_get_ny(ptr))

    def close(self) -> None:
        if self.ptr:
            mt.mtmd_bitmap_free(self.ptr)
            self.ptr = None


_log_routed = False


def _route_log() -> None:
    # libmtmd and its helpers have their own log hooks; without them they print to stderr and
    # the reason a projector was refused never reaches the message (recent_errors()).
    global _log_routed
    if not _log_routed:
        mt.mtmd_log_set(llama.log_callback(), None)
        mt.mtmd_helper_log_set(llama.log_callback(), None)
        _log_routed = True


class Projector:
    """A loaded projector bound to one language model."""

    def __init__(self, path: str | Path, model: llama.Model, n_threads: int) -> None:
        llama.ensure_backend()
        _route_log()
        self.path = Path(path)
        params = mt.mtmd_context_params_default()
        params.use_gpu = False
        params.n_threads = n_threads
        params.print_timings = False
        params.warmup = True
        before = len(llama.recent_errors())
        ptr = mt.mtmd_init_from_file(os.fsencode(self.path), model.ptr, params)
        if not ptr:
            errors = llama.recent_errors()[before:] if before < 8 else llama.recent_errors()
            detail = f" ({errors[-1]})" if errors else ""
            raise ProjectorError(f"libmtmd could not load the projector {self.path}{detail}")
        self.ptr: int | None = ptr
        if not mt.mtmd_support_vision(ptr):
            self.close()
            raise ProjectorError(
                f"{self.path.name} is a projector without a vision encoder (audio only?): it "
                "cannot read images. Choose the model's image projector (mmproj) file.")
        self.uses_mrope = bool(mt.mtmd_decode_use_mrope(ptr))

    def close(self) -> None:
        if self.ptr:
            mt.mtmd_free(self.ptr)
            self.ptr = None

    def bitmap(self, data: bytes, image_id: str) -> Bitmap:
        """Decode an encoded image (PNG, JPEG, WebP, ... whatever stb_image reads)."""
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        ptr = mt.mtmd_helper_bitmap_init_from_buf(self.ptr, buf, len(data), False)
        if not ptr:
            raise ImageError("libmtmd's image loader could not decode it (not PNG, JPEG, WebP, "
                             "GIF, BMP or another format stb_image reads, or damaged)")
        mt.mtmd_bitmap_set_id(ptr, image_id.encode())
        return Bitmap(ptr)

    def tokenize(self, text: str, bitmaps: list[Bitmap]) -> Chunks:
        """Split `text` at its image markers into text and image chunks (specials parsed; BOS
        is the caller's: the text is tokenized without adding specials)."""
        raw = text.encode("utf-8")
        inp = mt.mtmd_input_text()
        inp.text = raw
        inp.text_len = len(raw)
        inp.add_special = False
        inp.parse_special = True
        arr = (mt.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*[b.ptr for b in bitmaps])
        chunks = mt.mtmd_input_chunks_init()
        rc = int(mt.mtmd_tokenize(self.ptr, chunks, ctypes.byref(inp), arr, len(bitmaps)))
        if rc != 0:
            mt.mtmd_input_chunks_free(chunks)
            reason = {1: "the number of image markers in the prompt does not match the images",
                      2: "an image could not be preprocessed"}.get(rc, f"error {rc}")
            raise ProjectorError(f"libmtmd could not tokenize the prompt: {reason}")
        return Chunks(chunks)

    def encode(self, chunk: Chunk) -> int:
        """Run the vision encoder on one image chunk (uninterruptible); 0 on success."""
        return int(mt.mtmd_encode_chunk(self.ptr, chunk.ptr))

    def decode_image(self, ctx: llama.Context, chunk: Chunk, n_past: int) -> int:
        """Feed the last encoded image's embeddings to `ctx` at positions n_past...; returns
        llama_decode's code (0 = success, 2 = aborted)."""
        embd = mt.mtmd_get_output_embd(self.ptr)
        new_n_past = ll.llama_pos(0)
        return int(mt.mtmd_helper_decode_image_chunk(
            self.ptr, ctx.ptr, chunk.ptr, embd, n_past, 0, ctx.n_batch,
            ctypes.byref(new_n_past), _NO_POST_DECODE, None))


# A NULL post-decode callback (ctypes wants a typed function pointer, not None).
_NO_POST_DECODE = ctypes.cast(None, mt.mtmd_helper_post_decode_callback)


def model_n_embd(model: llama.Model) -> int:
    """The language model's embedding width (what a projector's output must match)."""
    return int(ll.llama_model_n_embd(model.ptr))
