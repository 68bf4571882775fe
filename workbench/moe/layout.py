"""What a GGUF model file holds, read from its header alone.

`read_model_facts` answers "what is this model" (architecture, size, experts, vocabulary, chat
template, shards) and `expert_tensors` tells the expert streamer where every expert's bytes sit.
Neither touches tensor data, so both stay fast on a many-gigabyte model.

Why not gguf.GGUFReader: it builds a numpy view for every value of every metadata array, which
takes ~20 s on a model with a 262k-token vocabulary. This module walks the same header format
(https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) with `struct`, skipping array
payloads, and reuses the gguf package's type tables. The unit tests cross-check it against
GGUFReader.

Every failure a user can cause (wrong path, a file that is not a GGUF, a truncated download, the
wrong shard of a split model) raises `ModelFileError` with a message that says what is wrong and
what to do; no raw traceback reaches the user.
"""

from __future__ import annotations

import mmap
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, LlamaFileType

from workbench.file_kind import not_regular

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
_SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")
_EXPERT_TENSOR = re.compile(
    r"^blk\.(?P<layer>\d+)\.ffn_(?P<kind>gate_up|gate|up|down)_exps\.weight$"
)
_SMALL_ARRAY = 4096  # numeric arrays up to this length keep their values (per-layer settings)

_SCALARS: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}


class ModelFileError(Exception):
    """A model file that cannot be used; the message is meant for the user as it stands."""


@dataclass(frozen=True)
class ModelFacts:
    """Header facts about a (possibly split) GGUF model. Absent numbers are -1, absent text ""."""

    path: Path  # the file the user named (the first shard of a split model)
    arch: str
    name: str
    n_params: int  # sum of tensor element counts
    file_type: str  # e.g. "Q4_K_M" from general.file_type, else the dominant tensor type
    dominant_type: str  # tensor type holding the most bytes
    n_layer: int
    n_embd: int
    n_expert: int  # 0 for a dense model
    n_expert_used: int  # 0 for a dense model
    n_ctx_train: int
    chat_template: str
    bos_token_id: int
    eos_token_id: int
    vocab_size: int
    n_tensors: int
    tensor_bytes: int  # sum of tensor data sizes (no padding)
    expert_bytes: int  # bytes in blk.*.ffn_*_exps.weight tensors
    n_expert_layers: int  # layers holding expert tensors (gemma4's first layer is dense)
    file_size: int  # all shards together
    shards: tuple[Path, ...]
    gguf_version: int
    # Entries of the tokenizer's token list (llama.cpp's n_vocab; -1 if absent). May differ from
    # vocab_size, the embedding rows, which some families pad per model size.
    n_tokens: int = -1

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    @property
    def n_shards(self) -> int:
        return len(self.shards)


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's place on disk. `shape` is in ggml order (ne0 first, fastest varying)."""

    name: str
    shape: tuple[int, ...]
    ggml_type: str
    n_elements: int
    n_bytes: int
    shard: int  # 0-based index into ModelFacts.shards
    path: Path  # the shard file holding the data
    offset: int  # absolute byte offset of the data in that file


@dataclass(frozen=True)
class ExpertTensor:
    """A stacked expert tensor, blk.<layer>.ffn_<kind>_exps.weight; experts are the last (slowest)
    dimension, so expert e occupies [offset + e * expert_stride, offset + (e+1) * expert_stride)."""

    name: str
    layer: int
    kind: str  # "gate", "up", "down" or "gate_up" (fused)
    shard: int
    path: Path
    offset: int
    n_bytes: int
    shape: tuple[int, ...]  # ggml order: (ne0, ne1, n_expert)
    ggml_type: str
    n_expert: int
    expert_stride: int  # bytes of one expert's slice

    def expert_offset(self, expert: int) -> int:
        if not 0 <= expert < self.n_expert:
            raise IndexError(f"expert {expert} outside 0..{self.n_expert - 1} in {self.name}")
        return self.offset + expert * self.expert_stride


# --- public API -----------------------------------------------------------------------------


def read_model_facts(path: str | Path) -> ModelFacts:
    """Facts about the model at `path` (a single GGUF or the first shard of a split one)."""
    facts, _ = _read_model(Path(path))
    return facts


def read_tensors(path: str | Path) -> list[TensorInfo]:
    """Every tensor of the model, in file order across shards."""
    _, tensors = _read_model(Path(path))
    return tensors


def expert_tensors(path: str | Path) -> list[ExpertTensor]:
    """The stacked expert tensors, ordered by layer then file position. Empty for a dense model."""
    out: list[ExpertTensor] = []
    for t in read_tensors(path):
        m = _EXPERT_TENSOR.match(t.name)
        if m is None or len(t.shape) != 3:
            continue
        n_expert = t.shape[2]
        out.append(ExpertTensor(
            name=t.name, layer=int(m["layer"]), kind=m["kind"], shard=t.shard, path=t.path,
            offset=t.offset, n_bytes=t.n_bytes, shape=t.shape, ggml_type=t.ggml_type,
            n_expert=n_expert, expert_stride=t.n_bytes // n_expert,
        ))
    out.sort(key=lambda e: (e.layer, e.shard, e.offset))
    return out


def format_facts(facts: ModelFacts) -> str:
    """A readable multi-line summary for `workbench inspect`."""
    lines = [("model", f"{facts.path.name}" + (f"  ({facts.name})" if facts.name else ""))]
    lines.append(("architecture", f"{facts.arch or '?'}, {_num(facts.n_layer)} layers, "
                                  f"embedding {_num(facts.n_embd)}"))
    if facts.is_moe:
        share = facts.expert_bytes / facts.tensor_bytes if facts.tensor_bytes else 0.0
        where = ("per layer" if facts.n_expert_layers == facts.n_layer
                 else f"per layer in {facts.n_expert_layers} of {_num(facts.n_layer)} layers")
        lines.append(("experts", f"{facts.n_expert} {where}, {facts.n_expert_used} used per "
                                 f"token; expert tensors {_size(facts.expert_bytes)} "
                                 f"({share:.0%} of the weights)"))
    else:
        lines.append(("experts", "none (dense model)"))
    lines.append(("parameters", _params(facts.n_params)))
    quant = facts.file_type
    if facts.dominant_type != facts.file_type:
        quant += f" (most bytes in {facts.dominant_type} tensors)"
    lines.append(("quantization", quant))
    lines.append(("context", f"{_num(facts.n_ctx_train)} tokens (trained)"))
    lines.append(("vocabulary", f"{_num(facts.vocab_size)} tokens, BOS {_num(facts.bos_token_id)}"
                                f", EOS {_num(facts.eos_token_id)}"))
    template = (f"yes ({len(facts.chat_template)} characters)" if facts.has_chat_template
                else "none (chat mode needs a template)")
    lines.append(("chat template", template))
    lines.append(("tensors", f"{facts.n_tensors}, {_size(facts.tensor_bytes)} of data"))
    files = "1 file" if facts.n_shards == 1 else f"{facts.n_shards} shards"
    lines.append(("file", f"{_size(facts.file_size)} in {files}, GGUF v{facts.gguf_version}"))
    width = max(len(k) for k, _ in lines)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in lines)


# --- reading --------------------------------------------------------------------------------


@dataclass
class _Header:
    version: int
    kv: dict[str, Any]  # scalars and small numeric arrays (as lists)
    array_lengths: dict[str, int]  # every array, by key
    tensors: list[tuple[str, tuple[int, ...], int, int]]  # name, ggml shape, type id, rel. offset
    data_offset: int


def _read_model(path: Path) -> tuple[ModelFacts, list[TensorInfo]]:
    shards = _shard_paths(path)
    headers = [_read_header(p) for p in shards]
    first = headers[0]
    _check_split_metadata(path, first, len(shards))

    tensors: list[TensorInfo] = []
    for shard_index, (shard_path, header) in enumerate(zip(shards, headers, strict=True)):
        tensors += _tensor_infos(shard_path, shard_index, header)
    expected = first.kv.get("split.tensors.count")
    if isinstance(expected, int) and expected != len(tensors):
        raise ModelFileError(
            f"{path.name}: the shards hold {len(tensors)} tensors but the first shard promises "
            f"{expected}; a shard is from another model or damaged. Download the shards again."
        )

    kv = first.kv
    arch = str(kv.get("general.architecture", ""))
    bytes_by_type: Counter[str] = Counter()
    for t in tensors:
        bytes_by_type[t.ggml_type] += t.n_bytes
    dominant = bytes_by_type.most_common(1)[0][0] if bytes_by_type else ""
    expert_matches = [(t, m) for t in tensors if (m := _EXPERT_TENSOR.match(t.name))]
    expert_bytes = sum(t.n_bytes for t, _ in expert_matches)
    n_expert_layers = len({m["layer"] for _, m in expert_matches})

    def arch_int(key: str, default: int = -1) -> int:
        value = kv.get(f"{arch}.{key}")
        if isinstance(value, list):  # per-layer arrays: the widest layer speaks for the model
            value = max(value) if value else None
        return int(value) if isinstance(value, int | float) else default

    vocab = arch_int("vocab_size")
    if vocab < 0:
        vocab = first.array_lengths.get("tokenizer.ggml.tokens", -1)
    n_expert = arch_int("expert_count", 0)

    facts = ModelFacts(
        path=path,
        arch=arch,
        name=str(kv.get("general.name", "")),
        n_params=sum(t.n_elements for t in tensors),
        file_type=_file_type_name(kv.get("general.file_type"), dominant),
        dominant_type=dominant,
        n_layer=arch_int("block_count"),
        n_embd=arch_int("embedding_length"),
        n_expert=n_expert,
        n_expert_used=arch_int("expert_used_count", 0) if n_expert > 0 else 0,
        n_ctx_train=arch_int("context_length"),
        chat_template=str(kv.get("tokenizer.chat_template", "")),
        bos_token_id=_int_or(kv.get("tokenizer.ggml.bos_token_id"), -1),
        eos_token_id=_int_or(kv.get("tokenizer.ggml.eos_token_id"), -1),
        vocab_size=vocab,
        n_tensors=len(tensors),
        tensor_bytes=sum(t.n_bytes for t in tensors),
        expert_bytes=expert_bytes,
        n_expert_layers=n_expert_layers,
        file_size=sum(p.stat().st_size for p in shards),
        shards=tuple(shards),
        gguf_version=first.version,
        n_tokens=first.array_lengths.get("tokenizer.ggml.tokens", -1),
    )
    return facts, tensors


def _shard_paths(path: Path) -> list[Path]:
    """[path] for a single file; every shard, in order, for the first shard of a split model."""
    _check_file(path)
    m = _SPLIT_NAME.match(path.name)
    if m is None:
        return [path]
    index, count = int(m["index"]), int(m["count"])
    first_name = f"{m['stem']}-00001-of-{m['count']}.gguf"
    if index != 1:
        raise ModelFileError(
            f"{path.name} is shard {index} of {count} of a split model; pass the first shard, "
            f"{first_name}, and keep all {count} shards in the same folder."
        )
    shards = [path.with_name(f"{m['stem']}-{i:05d}-of-{m['count']}.gguf") for i in
              range(1, count + 1)]
    missing = [p.name for p in shards if not p.is_file()]  # is_file: a FIFO shard is missing
    if missing:
        raise ModelFileError(
            f"{path.name} is the first of {count} shards, but {len(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing from {path.parent}: "
            f"{', '.join(missing)}. Put every shard in the same folder."
        )
    for p in shards[1:]:
        _check_file(p)
    return shards


def _check_file(path: Path) -> None:
    if not path.exists():
        raise ModelFileError(f"no model file at {path}; check the path (models end in .gguf).")
    if path.is_dir():
        raise ModelFileError(f"{path} is a folder; pass the .gguf model file inside it.")
    if kind := not_regular(path):  # opening a FIFO would wait for a writer forever
        raise ModelFileError(f"{path} is {kind}, not a model file; pass the path of a .gguf "
                             "file.")
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as e:
        raise ModelFileError(
            f"cannot read {path}: {e.strerror or e}. Check its permissions."
        ) from e
    if not head:
        raise ModelFileError(f"{path.name} is empty (0 bytes); the download or copy did not "
                             "finish. Fetch the model again.")
    if head != GGUF_MAGIC:
        raise ModelFileError(f"{path.name} is not a GGUF model (it does not start with 'GGUF'). "
                             "The workbench runs llama.cpp GGUF files; convert or download one.")


def _check_split_metadata(path: Path, header: _Header, n_files: int) -> None:
    count = header.kv.get("split.count")
    if isinstance(count, int) and count > 1 and n_files == 1:
        raise ModelFileError(
            f"{path.name} is part of a {count}-shard split model but its name does not say which "
            "(expected <name>-00001-of-0000N.gguf). Restore the shard names as downloaded."
        )
    if isinstance(count, int) and n_files > 1 and count != n_files:
        raise ModelFileError(
            f"{path.name}: the file names say {n_files} shards but the metadata says {count}. "
            "Download the shards again."
        )


def _tensor_infos(path: Path, shard: int, header: _Header) -> list[TensorInfo]:
    size = path.stat().st_size
    out = []
    for name, shape, type_id, rel_offset in header.tensors:
        try:
            qtype = GGMLQuantizationType(type_id)
        except ValueError:
            raise ModelFileError(
                f"{path.name}: tensor {name} has type id {type_id}, which this version of the "
                "gguf package does not know. Use a model in a more common quantization."
            ) from None
        block, type_size = GGML_QUANT_SIZES[qtype]
        n_elements = 1
        for d in shape:
            n_elements *= d
        n_bytes = n_elements // block * type_size
        offset = header.data_offset + rel_offset
        if offset + n_bytes > size:
            raise ModelFileError(
                f"{path.name} is truncated: tensor {name} needs bytes up to {offset + n_bytes:,} "
                f"but the file has {size:,}. The download or copy did not finish; fetch it again."
            )
        out.append(TensorInfo(name=name, shape=shape, ggml_type=qtype.name,
                              n_elements=n_elements, n_bytes=n_bytes, shard=shard, path=path,
                              offset=offset))
    return out


def _read_header(path: Path) -> _Header:
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _HeaderParser(buf).parse()
    except ModelFileError:
        raise
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as e:
        raise ModelFileError(
            f"{path.name} is truncated or damaged: its GGUF header cannot be read ({e}). "
            "Fetch the model again."
        ) from e
    except OSError as e:
        raise ModelFileError(f"cannot read {path}: {e.strerror or e}.") from e


class _HeaderParser:
    """Walks a GGUF v2/v3 header in a read-only buffer; never reads past the tensor infos."""

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf = buf
        self.pos = 0

    def _unpack(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return value

    def _string(self) -> str:
        n = self._unpack("<Q")
        if self.pos + n > len(self.buf):
            raise struct.error("string runs past the end of the file")
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def _skip_strings(self, count: int) -> None:
        end = len(self.buf)
        for _ in range(count):
            n = struct.unpack_from("<Q", self.buf, self.pos)[0]
            self.pos += 8 + n
            if self.pos > end:
                raise struct.error("string array runs past the end of the file")

    def _value(self, vtype: GGUFValueType) -> Any:
        if vtype == GGUFValueType.STRING:
            return self._string()
        return self._unpack(_SCALARS[vtype])

    def parse(self) -> _Header:
        if self.buf[:4] != GGUF_MAGIC:
            raise ModelFileError("not a GGUF file")  # _check_file normally says it better
        self.pos = 4
        version = self._unpack("<I")
        if version not in (2, 3):
            raise ModelFileError(f"GGUF version {version} is not supported (only 2 and 3).")
        n_tensors = self._unpack("<Q")
        n_kv = self._unpack("<Q")
        # Sanity bounds before looping: a damaged count would otherwise spin for ages.
        if n_tensors > len(self.buf) // 24 or n_kv > len(self.buf) // 12:
            raise struct.error("tensor or key counts larger than the file could hold")

        kv: dict[str, Any] = {}
        array_lengths: dict[str, int] = {}
        for _ in range(n_kv):
            key = self._string()
            vtype = GGUFValueType(self._unpack("<I"))
            if vtype != GGUFValueType.ARRAY:
                kv[key] = self._value(vtype)
                continue
            etype = GGUFValueType(self._unpack("<I"))
            count = self._unpack("<Q")
            array_lengths[key] = count
            if etype == GGUFValueType.STRING:
                self._skip_strings(count)
            elif etype == GGUFValueType.ARRAY:
                raise ModelFileError(f"nested array in metadata key {key} is not supported")
            else:
                fmt = _SCALARS[etype]
                width = struct.calcsize(fmt)
                if count <= _SMALL_ARRAY:
                    kv[key] = list(struct.unpack_from(f"<{count}{fmt[1]}", self.buf, self.pos))
                self.pos += width * count
                if self.pos > len(self.buf):
                    raise struct.error("array runs past the end of the file")

        tensors = []
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._unpack("<I")
            if n_dims > 8:
                raise struct.error(f"tensor {name} claims {n_dims} dimensions")
            shape = tuple(self._unpack("<Q") for _ in range(n_dims))
            type_id = self._unpack("<I")
            rel_offset = self._unpack("<Q")
            tensors.append((name, shape, type_id, rel_offset))

        alignment = kv.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise ModelFileError(f"invalid general.alignment {alignment!r}")
        data_offset = -(-self.pos // alignment) * alignment
        return _Header(version, kv, array_lengths, tensors, data_offset)


# --- formatting helpers ---------------------------------------------------------------------


def _file_type_name(value: Any, dominant: str) -> str:
    if not isinstance(value, int):
        return dominant
    try:
        ftype = LlamaFileType(value)
    except ValueError:
        return f"file type {value}"
    if ftype == LlamaFileType.GUESSED:
        return dominant
    return ftype.name.removeprefix("MOSTLY_").removeprefix("ALL_")


def _int_or(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int) else default


def _num(value: int) -> str:
    return "unknown" if value < 0 else f"{value:,}"


def _size(n_bytes: int) -> str:
    size = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _params(n: int) -> str:
    for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.2f} {suffix} ({n:,})"
    return f"{n:,}"
