"""Synthetic Mixture-of-Experts GGUF models with random weights, for tests and benchmarks.

The models load and generate in real llama.cpp, but their text is noise. They exist so that every
piece of the expert machinery (routing telemetry, expert caches, streaming, byte-identity gates)
can be exercised without a multi-gigabyte download. Two properties matter more than realism:

* Experts matter. With the usual tiny init (every weight N(0, 0.02)) the expert FFNs barely touch
  the residual stream, so a broken expert loader would go unnoticed. Here the expert matrices use
  a 1/sqrt(fan_in) scale, the down-projections are larger still, and attention is kept small, so
  the logits follow the experts' output.
* The bench size routes like a real model (the churning recipe, qwen3moe): varied greedy text,
  consecutive tokens sharing some experts, hot experts and a long tail, a dominant top router
  weight with a tail of small ones. Attention is built as a recency kernel that copies recent
  tokens into the stream and the output head avoids what is there (see _churn_attention); the
  figures are in docs/benchmarks.md, checked by tests/engine/test_churn_model.py.
* Architectures: qwen3moe, gemma4 (fused gate+up), bailingmoe3 (KDA + MLA, shared expert) and
  deepseek4 (hyper-connections, compressed attention, shared expert), each as the pinned
  llama.cpp's loader wants it.
* Everything is reproducible. Each tensor (and each expert slice of an expert tensor) draws from
  its own generator seeded by (seed, tensor name, expert), so a file is byte-identical for a seed,
  and a corrupted or zeroed expert differs from the clean model only in that slice's bytes.

Only the standard library, numpy and the `gguf` package are used: no llama.cpp import here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFWriter, TokenType
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

from workbench.atomic_write import StagedFiles

ARCHES: tuple[str, ...] = ("qwen3moe", "gemma4", "bailingmoe3", "deepseek4")
SIZES: tuple[str, ...] = ("tiny", "bench")
# The archs whose router may leave its top-k weights unnormalised (SynthSpec.router_norm).
UNNORMALISED_ARCHES: tuple[str, ...] = ("bailingmoe3", "deepseek4")
WEIGHT_TYPES: tuple[str, ...] = ("F32", "F16", "Q8_0", "Q4_0")

# A small ChatML template: enough for chat mode to render a conversation. The markers are plain
# text in this byte vocabulary (they tokenize to bytes), which is fine for a noise model.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Byte-fallback SentencePiece vocabulary: three specials, then one token per byte value.
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
N_SPECIAL = 3
VOCAB_SIZE = N_SPECIAL + 256

_FILE_TYPES = {
    "F32": LlamaFileType.ALL_F32,
    "F16": LlamaFileType.MOSTLY_F16,
    "Q8_0": LlamaFileType.MOSTLY_Q8_0,
    "Q4_0": LlamaFileType.MOSTLY_Q4_0,
}
_CORRUPT_SALT = 0xC0FFEE  # mixed into the seed of a corrupted expert slice


@dataclass(frozen=True)
class SynthSpec:
    """Everything that shapes a synthetic model; the size presets are instances of it."""

    arch: str = "qwen3moe"
    name: str = "workbench-synthetic-moe"
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 32
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 128  # hidden width of one expert
    n_ff_shared: int = 128  # gemma4 only: the always-on shared FFN width
    n_ctx_train: int = 256
    rms_eps: float = 1e-6
    rope_base: float = 1e6
    expert_type: str = "F32"  # storage type of the *_exps tensors
    dense_type: str = "F32"  # storage type of the other matrices (norms and router stay F32)
    # Scales (standard deviations) of the random weights, relative to 1/sqrt(fan_in).
    attn_gain: float = 0.5  # small: attention nudges, experts decide
    expert_gain: float = 1.0  # gate/up projections
    down_gain: float = 4.0  # expert down-projection: large, so the experts dominate the residual
    router_gain: float = 2.0  # sharpens routing so top-k choices differ clearly per token
    logit_gain: float = 3.0  # output head: logits of a few units, so greedy picks vary
    # >0 skews expert popularity per layer (a few hot experts, a long cold tail), as real routers
    # show; a cache then has something to keep. 0 leaves routing to the random weights.
    router_skew: float = 0.0
    # The churning recipe (the bench default): routing that changes like a real model's.
    churn: bool = False
    attn_focus: float = 1.1  # churn: q/k norm weight; sets how far back the recency kernel looks
    copy_gain: float = 1.0  # churn: how strongly attention copies recent tokens into the stream
    repeat_gain: float = 30.0  # churn: how strongly the head avoids tokens in the stream
    router_zipf: float = 0.2  # churn: router row scales fall as rank^-zipf (popularity skew)
    # False: the router's top-k weights are used as the gating function gives them, without
    # rescaling them to sum to 1 (gguf `<arch>.expert_weights_norm`). Only bailingmoe3 (sigmoid
    # gating: each weight in (0, 1)) and deepseek4 read the key; qwen3moe and gemma4 always
    # normalise in llama.cpp. Dropping's rules (the pinned top expert, renormalisation to the
    # row's own total) can only be told apart on such a router.
    router_norm: bool = True
    # Layout of the output file(s).
    split_max_tensors: int = 0  # >0: split into <stem>-0000i-of-0000K.gguf shards
    # Damage for negative controls; the rest of the file stays byte-identical.
    zero_experts: bool = False  # every expert slice of every layer all zeros
    corrupt_expert: tuple[int, int] | None = None  # (layer, expert) redrawn with another seed
    # bench only: when set, n_layer is chosen so the expert tensors total about this many GiB.
    target_gib: float | None = None

    @property
    def expert_bytes(self) -> int:
        """On-disk bytes of one expert (gate + up + down) in one layer."""
        per_matrix = _nbytes((self.n_ff_exp, self.n_embd), self.expert_type)
        return 3 * per_matrix

    @property
    def layer_expert_bytes(self) -> int:
        return self.n_expert * self.expert_bytes


PRESETS: dict[str, SynthSpec] = {
    # A 7 MiB file, 6 MiB of it experts: 4 layers x 8 experts x 192 KiB, top-2. A cache of a
    # handful of experts must evict.
    "tiny": SynthSpec(),
    # Real-model proportions (Qwen3-30B-A3B-like widths): one Q4_0 expert is ~2.6 MiB, so the
    # cost of reading an expert is what it is on a real model. Layers follow target_gib.
    "bench": SynthSpec(
        name="workbench-synthetic-moe-bench",
        n_layer=8,
        n_embd=2048,
        n_head=32,
        n_head_kv=4,
        head_dim=64,
        n_expert=128,
        n_expert_used=8,
        n_ff_exp=768,
        n_ff_shared=768,
        n_ctx_train=4096,
        expert_type="Q4_0",
        dense_type="Q8_0",
        # Routing that churns like a real model's (see _churn_attention and _router): varied
        # greedy text, consecutive tokens sharing some experts, hot experts and a long tail.
        churn=True,
        rope_base=1e4,  # a RoPE spread that gives the recency kernel a reach of ~10 tokens
        # A sharp router with skewed popularity: a dominant top slot (mean ~0.75 at k=8) and a
        # tail of small weights, so that cache-aware dropping at 0.75 discards a few percent of
        # the router's weight mass, as upstream's replays of real routers find (4.4 % on
        # Qwen3-30B). The gentler router before it (gain 2, zipf 0.2) put 24 % of the mass in
        # slots below 0.75/k, so every dropping figure was a flat router's, not a real one's.
        # The smaller down gain keeps greedy text from cycling under the sharper weights.
        router_gain=3.0,
        router_zipf=0.4,
        down_gain=3.0,
        target_gib=2.0,
    ),
}


def spec_for(arch: str = "qwen3moe", size: str = "tiny", **overrides: Any) -> SynthSpec:
    """The preset for `size`, with `arch` and any SynthSpec field overridden, validated."""
    if size not in PRESETS:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    names = {f.name for f in dataclasses.fields(SynthSpec)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(names))}"
        )
    if "corrupt_expert" in overrides and overrides["corrupt_expert"] is not None:
        overrides["corrupt_expert"] = tuple(int(v) for v in overrides["corrupt_expert"])
    if "n_layer" in overrides:
        # An explicit layer count wins over the preset's size target.
        if overrides.get("target_gib") is not None:
            raise ValueError("give n_layer or target_gib, not both")
        overrides["target_gib"] = None
    preset = PRESETS[size]
    if preset.churn and arch != "qwen3moe" and "churn" not in overrides:
        # The churning recipe is qwen3moe's; other archs keep the plain bench recipe.
        preset = dataclasses.replace(preset, churn=False, router_skew=1.0, router_gain=2.0,
                                     router_zipf=0.2, down_gain=4.0, rope_base=1e6)
    spec = dataclasses.replace(preset, arch=arch, **overrides)
    if spec.target_gib is not None:
        n_layer = max(1, round(spec.target_gib * 2**30 / spec.layer_expert_bytes))
        if arch == "gemma4":
            n_layer += 1  # its first layer is dense
        spec = dataclasses.replace(spec, n_layer=n_layer)
    _validate(spec)
    return spec


def write_synthetic_moe(
    path: str | Path,
    arch: str = "qwen3moe",
    size: str = "tiny",
    seed: int = 0,
    **overrides: Any,
) -> list[Path]:
    """Write a synthetic MoE GGUF to `path`; returns the file(s) written (shards in order).

    `overrides` are SynthSpec fields, e.g. ``zero_experts=True``, ``corrupt_expert=(1, 3)``,
    ``split_max_tensors=20``, ``n_layer=6``, ``expert_type="Q8_0"``, ``target_gib=4``.
    """
    return write_spec(path, spec_for(arch, size, **overrides), seed=seed)


def write_spec(path: str | Path, spec: SynthSpec, seed: int = 0) -> list[Path]:
    """Write the model `spec` describes. Tensors are generated and written one slice at a time,
    so a multi-GiB bench model needs only one expert's worth of memory.

    The files appear whole or not at all: they are written in a hidden directory beside `path`
    and renamed into place at the end (atomic_write.StagedFiles). `path`'s directory must exist;
    a full disk or any other write failure is an OutputFileError and leaves nothing behind.
    """
    _validate(spec)
    path = Path(path)
    plans = _tensor_plans(spec)
    with StagedFiles(path) as stage:
        writer = GGUFWriter(
            stage.target,
            spec.arch,
            split_max_tensors=spec.split_max_tensors,
            # Metadata alone in shard 1, like the upstream's split models: a reader must then
            # follow the shards to find any tensor at all.
            small_first_shard=spec.split_max_tensors > 0,
        )
        _add_metadata(writer, spec)
        for plan in plans:
            writer.add_tensor_info(
                plan.name,
                plan.shape,
                np.dtype(np.float32),
                _nbytes(plan.shape, plan.ggml_type),
                raw_dtype=GGMLQuantizationType[plan.ggml_type],
            )
        files = writer.format_shard_names(stage.target)
        try:
            _write_files(writer, {plan.name: plan for plan in plans}, spec, seed)
            writer.close()  # the last flush: a full disk can show here too
        except BaseException:
            _close_quietly(writer)
            raise
        return stage.commit(files)


def _write_files(writer: GGUFWriter, by_name: dict[str, _Plan], spec: SynthSpec,
                 seed: int) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    assert writer.fout is not None
    # The writer keeps each shard's tensor infos in file order; stream the data ourselves so
    # no tensor has to be held whole in memory.
    for fout, shard in zip(writer.fout, writer.tensors, strict=True):
        writer.write_padding(fout, fout.tell())
        for name, info in shard.items():
            written = 0
            for chunk in _tensor_chunks(by_name[name], spec, seed):
                # fout.write, not chunk.tofile: tofile writes below the file object and reports
                # a full disk as "N requested and M written", without the errno that lets the
                # message say what happened. A large write goes straight through, uncopied.
                fout.write(np.ascontiguousarray(chunk).data)
                written += chunk.nbytes
            if written != info.nbytes:
                raise AssertionError(f"{name}: wrote {written} bytes, planned {info.nbytes}")
            writer.write_padding(fout, written)


def _close_quietly(writer: GGUFWriter) -> None:
    """Close every shard even if one's final flush fails (the files are being thrown away);
    GGUFWriter.close() stops at the first error and would leave the others open."""
    for fout in writer.fout or ():
        with contextlib.suppress(OSError):
            fout.close()
    writer.fout = None


# --- the tensor plan ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """One tensor to write. `shape` is in numpy order (outermost first; experts first)."""

    name: str
    shape: tuple[int, ...]
    ggml_type: str
    std: float = 0.0  # standard deviation of the random values
    fill: float | None = None  # constant value instead of random (norms)
    layer: int = -1
    per_expert: bool = False  # generated one expert slice at a time (an *_exps tensor)
    zero_rows: tuple[int, ...] = ()  # rows forced to 0 (output rows of tokens never to emit)
    shared_dir: float = 0.0  # weight of the shared direction added to every row (router skew)
    row_bias: tuple[float, ...] = ()  # per-row multiplier of the shared direction
    churn: str = ""  # the churning recipe's construction of this tensor (see _dense_values)


def _tensor_plans(spec: SynthSpec) -> list[_Plan]:
    if spec.arch == "qwen3moe":
        return _qwen3moe_plans(spec)
    if spec.arch == "gemma4":
        return _gemma4_plans(spec)
    if spec.arch == "bailingmoe3":
        return _bailingmoe3_plans(spec)
    if spec.arch == "deepseek4":
        return _deepseek4_plans(spec)
    raise ValueError(f"unknown arch {spec.arch!r}; choose one of {', '.join(ARCHES)}")


def _common_head(spec: SynthSpec) -> list[_Plan]:
    # Embeddings of rms ~1 put the residual stream at unit scale. With router skew they share
    # one direction, which the skewed router rows then read as a popularity bias.
    return [
        _Plan("token_embd.weight", (VOCAB_SIZE, spec.n_embd), spec.dense_type, std=1.0,
              shared_dir=1.0 if spec.router_skew > 0 else 0.0,
              churn="embd" if spec.churn else ""),
    ]


def _common_tail(spec: SynthSpec) -> list[_Plan]:
    return [
        _norm(spec, "output_norm.weight"),
        _Plan("output.weight", (VOCAB_SIZE, spec.n_embd), spec.dense_type,
              std=spec.logit_gain / math.sqrt(spec.n_embd), zero_rows=_silent_token_ids(),
              churn="output" if spec.churn else ""),
    ]


def _norm(spec: SynthSpec, name: str) -> _Plan:
    """An RMS norm weight of ones; in the churning recipe it also hides the shared coordinates
    (the feed-forward, router and output head then see tokens, not the constant q/k feed)."""
    if spec.churn:
        return _Plan(name, (spec.n_embd,), "F32", churn="blind")
    return _Plan(name, (spec.n_embd,), "F32", fill=1.0)


def _attention(spec: SynthSpec, il: int) -> list[_Plan]:
    q_dim = spec.n_head * spec.head_dim
    kv_dim = spec.n_head_kv * spec.head_dim
    s_in = spec.attn_gain / math.sqrt(spec.n_embd)
    s_out = spec.attn_gain / math.sqrt(q_dim)
    blk = f"blk.{il}"
    if spec.churn:
        norm = spec.attn_focus
        return [
            _Plan(f"{blk}.attn_q.weight", (q_dim, spec.n_embd), spec.dense_type, churn="qk"),
            _Plan(f"{blk}.attn_k.weight", (kv_dim, spec.n_embd), spec.dense_type, churn="qk"),
            _Plan(f"{blk}.attn_v.weight", (kv_dim, spec.n_embd), spec.dense_type, churn="v"),
            _Plan(f"{blk}.attn_output.weight", (spec.n_embd, q_dim), spec.dense_type, churn="o"),
            _Plan(f"{blk}.attn_q_norm.weight", (spec.head_dim,), "F32", fill=norm),
            _Plan(f"{blk}.attn_k_norm.weight", (spec.head_dim,), "F32", fill=norm),
        ]
    return [
        _Plan(f"{blk}.attn_q.weight", (q_dim, spec.n_embd), spec.dense_type, std=s_in),
        _Plan(f"{blk}.attn_k.weight", (kv_dim, spec.n_embd), spec.dense_type, std=s_in),
        _Plan(f"{blk}.attn_v.weight", (kv_dim, spec.n_embd), spec.dense_type, std=s_in),
        _Plan(f"{blk}.attn_output.weight", (spec.n_embd, q_dim), spec.dense_type, std=s_out),
        _Plan(f"{blk}.attn_q_norm.weight", (spec.head_dim,), "F32", fill=1.0),
        _Plan(f"{blk}.attn_k_norm.weight", (spec.head_dim,), "F32", fill=1.0),
    ]


def _router(spec: SynthSpec, il: int) -> _Plan:
    if spec.churn:
        return _Plan(f"blk.{il}.ffn_gate_inp.weight", (spec.n_expert, spec.n_embd), "F32",
                     std=spec.router_gain / math.sqrt(spec.n_embd), layer=il, churn="router")
    return _Plan(
        f"blk.{il}.ffn_gate_inp.weight", (spec.n_expert, spec.n_embd), "F32",
        std=spec.router_gain / math.sqrt(spec.n_embd), layer=il,
        # The shared direction has |u|^2 ~ n_embd, so this keeps the bias in router-logit units.
        shared_dir=spec.router_skew * spec.router_gain / spec.n_embd,
        row_bias=_popularity(spec, il) if spec.router_skew > 0 else (),
    )


def _experts(spec: SynthSpec, il: int, fused_gate_up: bool) -> list[_Plan]:
    e, d, f = spec.n_expert, spec.n_embd, spec.n_ff_exp
    blk = f"blk.{il}"
    s_in = spec.expert_gain / math.sqrt(d)
    s_down = spec.down_gain / math.sqrt(f)
    t = spec.expert_type
    if fused_gate_up:
        gate_up = [_Plan(f"{blk}.ffn_gate_up_exps.weight", (e, 2 * f, d), t, std=s_in,
                         layer=il, per_expert=True)]
    else:
        gate_up = [
            _Plan(f"{blk}.ffn_gate_exps.weight", (e, f, d), t, std=s_in, layer=il, per_expert=True),
            _Plan(f"{blk}.ffn_up_exps.weight", (e, f, d), t, std=s_in, layer=il, per_expert=True),
        ]
    down = _Plan(f"{blk}.ffn_down_exps.weight", (e, d, f), t, std=s_down, layer=il,
                 per_expert=True)
    return [*gate_up, down]


def _qwen3moe_plans(spec: SynthSpec) -> list[_Plan]:
    plans = _common_head(spec)
    for il in range(spec.n_layer):
        plans.append(_Plan(f"blk.{il}.attn_norm.weight", (spec.n_embd,), "F32", fill=1.0))
        plans += _attention(spec, il)
        plans.append(_norm(spec, f"blk.{il}.ffn_norm.weight"))
        plans.append(_router(spec, il))
        plans += _experts(spec, il, fused_gate_up=False)
    return plans + _common_tail(spec)


def _gemma4_plans(spec: SynthSpec) -> list[_Plan]:
    """Gemma 4 as llama.cpp's gemma4 loader builds it: a dense first layer, then MoE layers with
    an always-on shared FFN beside the routed experts (fused gate+up), sandwich norms, and one
    full-attention layer among sliding-window ones (which needs rope_freqs).

    Every branch output is RMS-normalised by its post-norm, so the norm weights set how much each
    branch adds to the residual: attention and the shared FFN are kept quiet, experts loud."""
    d = spec.n_embd
    inv = 1.0 / math.sqrt(d)
    plans = [
        # The graph scales embeddings by sqrt(n_embd): rows of rms 1/sqrt(n_embd) give rms 1.
        _Plan("token_embd.weight", (VOCAB_SIZE, d), spec.dense_type, std=inv,
              shared_dir=inv if spec.router_skew > 0 else 0.0),
        _Plan("rope_freqs.weight", (spec.head_dim // 2,), "F32", fill=1.0),
    ]
    moe = set(moe_layers(spec))
    for il in range(spec.n_layer):
        blk = f"blk.{il}"
        plans.append(_Plan(f"{blk}.attn_norm.weight", (d,), "F32", fill=1.0))
        plans += _attention(spec, il)
        plans.append(_Plan(f"{blk}.post_attention_norm.weight", (d,), "F32",
                           fill=_GEMMA4_ATTN_OUT))
        f = spec.n_ff_shared
        plans += [
            _Plan(f"{blk}.ffn_norm.weight", (d,), "F32", fill=1.0),
            _Plan(f"{blk}.ffn_gate.weight", (f, d), spec.dense_type, std=inv),
            _Plan(f"{blk}.ffn_up.weight", (f, d), spec.dense_type, std=inv),
            _Plan(f"{blk}.ffn_down.weight", (d, f), spec.dense_type, std=1.0 / math.sqrt(f)),
            _Plan(f"{blk}.post_ffw_norm.weight", (d,), "F32", fill=_GEMMA4_FFN_OUT),
        ]
        if il in moe:
            plans += [
                _router(spec, il),
                # The router reads rms_norm(x) / sqrt(n_embd) * scale: sqrt(n_embd) undoes it.
                _Plan(f"{blk}.ffn_gate_inp.scale", (d,), "F32", fill=math.sqrt(d)),
                _Plan(f"{blk}.pre_ffw_norm_2.weight", (d,), "F32", fill=1.0),
                _Plan(f"{blk}.post_ffw_norm_1.weight", (d,), "F32", fill=_GEMMA4_SHARED_OUT),
                _Plan(f"{blk}.post_ffw_norm_2.weight", (d,), "F32", fill=1.0),
                *_experts(spec, il, fused_gate_up=True),
            ]
    return plans + _common_tail(spec)


# bailingmoe3's MLA widths, fixed (the synthetic model needs one valid set, not a sweep).
_MLA_KV_LORA = 64  # kv_lora_rank: the compressed KV each token caches
_MLA_ROPE = 16  # qk_rope_head_dim: the rotary part of q and k (one shared k head)
_MLA_NOPE = 32  # qk_nope_head_dim
_MLA_V = 32  # v_head_dim
_KDA_CONV = 4  # ssm.conv_kernel: the short causal convolution before KDA's q, k, v


def bailingmoe3_mla_layers(spec: SynthSpec) -> list[int]:
    """Layers with MLA attention; the others are KDA (linear, recurrent) like Ling 3's mostly
    linear stack. Every fourth layer and the last are MLA, so both memories exist."""
    return sorted({il for il in range(spec.n_layer) if il % 4 == 3} | {spec.n_layer - 1})


def _bailingmoe3_plans(spec: SynthSpec) -> list[_Plan]:
    """Ling 3 (bailingmoe3) as llama.cpp's loader builds it: KDA (Kimi delta attention) layers
    and MLA layers (bailingmoe3_mla_layers), each followed by a router with its selection bias,
    the routed experts (split gate/up/down) and one always-on shared expert. No leading dense
    layer and no NextN (MTP) block: neither is needed to run, and the streamer leaves both
    resident anyway."""
    d, n_head = spec.n_embd, spec.n_head
    s_in = spec.attn_gain / math.sqrt(d)
    t = spec.dense_type
    inner = n_head * spec.head_dim  # KDA width
    mla = set(bailingmoe3_mla_layers(spec))
    plans = _common_head(spec)
    for il in range(spec.n_layer):
        blk = f"blk.{il}"
        f = spec.n_ff_shared
        plans.append(_Plan(f"{blk}.attn_norm.weight", (d,), "F32", fill=1.0))
        if il in mla:
            plans += [
                _Plan(f"{blk}.attn_q.weight", (n_head * (_MLA_NOPE + _MLA_ROPE), d), t, std=s_in),
                _Plan(f"{blk}.attn_kv_a_mqa.weight", (_MLA_KV_LORA + _MLA_ROPE, d), t, std=s_in),
                _Plan(f"{blk}.attn_kv_a_norm.weight", (_MLA_KV_LORA,), "F32", fill=1.0),
                _Plan(f"{blk}.attn_k_b.weight", (n_head, _MLA_KV_LORA, _MLA_NOPE), "F32",
                      std=spec.attn_gain / math.sqrt(_MLA_NOPE)),
                _Plan(f"{blk}.attn_v_b.weight", (n_head, _MLA_V, _MLA_KV_LORA), "F32",
                      std=1.0 / math.sqrt(_MLA_KV_LORA)),
                _Plan(f"{blk}.attn_gate.weight", (n_head, d), "F32", std=s_in),
                _Plan(f"{blk}.attn_output.weight", (d, n_head * _MLA_V), t,
                      std=spec.attn_gain / math.sqrt(n_head * _MLA_V)),
            ]
        else:
            plans += [
                *(_Plan(f"{blk}.ssm_conv1d_{x}.weight", (inner, 1, _KDA_CONV), "F32",
                        std=1.0 / math.sqrt(_KDA_CONV)) for x in "qkv"),
                *(_Plan(f"{blk}.attn_{x}.weight", (inner, d), t, std=s_in) for x in "qkv"),
                _Plan(f"{blk}.ssm_f_a.weight", (inner, d), "F32", std=s_in),
                _Plan(f"{blk}.ssm_beta.weight", (n_head, d), "F32", std=s_in),
                _Plan(f"{blk}.ssm_a", (n_head, 1), "F32", fill=1.0),
                _Plan(f"{blk}.ssm_dt.bias", (inner,), "F32", fill=0.0),
                _Plan(f"{blk}.ssm_g_a.weight", (inner, d), "F32", std=s_in),
                _Plan(f"{blk}.ssm_norm.weight", (spec.head_dim,), "F32", fill=1.0),
                _Plan(f"{blk}.attn_output.weight", (d, inner), t,
                      std=spec.attn_gain / math.sqrt(inner)),
            ]
        plans += [
            _Plan(f"{blk}.ffn_norm.weight", (d,), "F32", fill=1.0),
            _router(spec, il),
            _Plan(f"{blk}.exp_probs_b.bias", (spec.n_expert,), "F32", fill=0.0),
            *_experts(spec, il, fused_gate_up=False),
            _Plan(f"{blk}.ffn_gate_shexp.weight", (f, d), t, std=1.0 / math.sqrt(d)),
            _Plan(f"{blk}.ffn_up_shexp.weight", (f, d), t, std=1.0 / math.sqrt(d)),
            # Quiet next to the experts, so a wrong expert slice still shows in the logits.
            _Plan(f"{blk}.ffn_down_shexp.weight", (d, f), t, std=0.5 / math.sqrt(f)),
        ]
    return plans + _common_tail(spec)


# deepseek4's fixed attention and hyper-connection widths.
_DSV4_Q_LORA = 64
_DSV4_O_GROUPS = 2
_DSV4_O_LORA = 32
_DSV4_HC = 4  # residual copies mixed by the hyper-connections (llama.cpp asserts 4)
_DSV4_ROPE = 16
_DSV4_INDEXER_HEADS = 2
_DSV4_INDEXER_DIM = 64
# Head width: llama.cpp rotates K by a Hadamard block of 64 (or more) that must divide it.
_DSV4_HEAD = 64


def deepseek4_compress_ratios(spec: SynthSpec) -> list[int]:
    """Per-layer attention compression: plain (0), compressed-sparse with an indexer (4) and
    heavily compressed (128), in turn. Both compressed kinds must occur: llama.cpp's deepseek4
    KV cache divides by zero (SIGFPE in build_input_k_rot) when either of its compressed caches
    has no layer."""
    return [(0, 4, 128)[il % 3] for il in range(spec.n_layer)]


def _deepseek4_plans(spec: SynthSpec) -> list[_Plan]:
    """DeepSeek V4 as llama.cpp's loader builds it: low-rank q, one shared kv head with sinks,
    grouped low-rank output, compressed attention on some layers (deepseek4_compress_ratios,
    with its compressor and, at ratio 4, its indexer), hyper-connections around attention and
    FFN (near-neutral mixing: zero fn, zero base), a router with selection bias, routed experts
    (split gate/up/down) and one shared expert. No hash-routed layer and no NextN block."""
    d, n_head, h = spec.n_embd, spec.n_head, _DSV4_HEAD
    s_in = spec.attn_gain / math.sqrt(d)
    t = spec.dense_type
    hc_dim, hc_mix = _DSV4_HC * d, (2 + _DSV4_HC) * _DSV4_HC
    plans = [
        *_common_head(spec),
        _Plan("output_hc_fn.weight", (_DSV4_HC, hc_dim), "F32", fill=0.0),
        _Plan("output_hc_base.weight", (_DSV4_HC,), "F32", fill=0.0),
        _Plan("output_hc_scale.weight", (1,), "F32", fill=1.0),
    ]
    for il in range(spec.n_layer):
        blk = f"blk.{il}"
        f = spec.n_ff_exp  # the shared expert is n_ff_exp x expert_shared_count wide
        plans += [
            _Plan(f"{blk}.attn_norm.weight", (d,), "F32", fill=1.0),
            _Plan(f"{blk}.attn_sinks.weight", (n_head,), "F32", fill=0.0),
            _Plan(f"{blk}.attn_q_a.weight", (_DSV4_Q_LORA, d), t, std=1.0 / math.sqrt(d)),
            _Plan(f"{blk}.attn_q_a_norm.weight", (_DSV4_Q_LORA,), "F32", fill=1.0),
            _Plan(f"{blk}.attn_q_b.weight", (n_head * h, _DSV4_Q_LORA), t,
                  std=spec.attn_gain / math.sqrt(_DSV4_Q_LORA)),
            _Plan(f"{blk}.attn_kv.weight", (h, d), t, std=s_in),
            _Plan(f"{blk}.attn_kv_a_norm.weight", (h,), "F32", fill=1.0),
            _Plan(f"{blk}.attn_output_a.weight", (_DSV4_O_LORA * _DSV4_O_GROUPS,
                                                  n_head * h // _DSV4_O_GROUPS), t,
                  std=1.0 / math.sqrt(n_head * h // _DSV4_O_GROUPS)),
            _Plan(f"{blk}.attn_output_b.weight", (d, _DSV4_O_GROUPS * _DSV4_O_LORA), t,
                  std=spec.attn_gain / math.sqrt(_DSV4_O_GROUPS * _DSV4_O_LORA)),
        ]
        ratio = deepseek4_compress_ratios(spec)[il]
        if ratio:
            coff = 2 if ratio == 4 else 1  # the overlapping (ratio 4) compressor is twice as wide
            plans += [
                _Plan(f"{blk}.attn_compressor_kv.weight", (coff * h, d), "F32", std=s_in),
                _Plan(f"{blk}.attn_compressor_gate.weight", (coff * h, d), "F32", std=s_in),
                _Plan(f"{blk}.attn_compressor_ape.weight", (ratio, coff * h), "F32", fill=0.0),
                _Plan(f"{blk}.attn_compressor_norm.weight", (h,), "F32", fill=1.0),
            ]
        if ratio == 4:
            hi, ni = _DSV4_INDEXER_DIM, _DSV4_INDEXER_HEADS
            plans += [
                _Plan(f"{blk}.indexer.proj.weight", (ni, d), "F32", std=s_in),
                _Plan(f"{blk}.indexer.attn_q_b.weight", (ni * hi, _DSV4_Q_LORA), "F32",
                      std=1.0 / math.sqrt(_DSV4_Q_LORA)),
                _Plan(f"{blk}.indexer_compressor_kv.weight", (2 * hi, d), "F32", std=s_in),
                _Plan(f"{blk}.indexer_compressor_gate.weight", (2 * hi, d), "F32", std=s_in),
                _Plan(f"{blk}.indexer_compressor_ape.weight", (ratio, 2 * hi), "F32", fill=0.0),
                _Plan(f"{blk}.indexer_compressor_norm.weight", (hi,), "F32", fill=1.0),
            ]
        for part in ("attn", "ffn"):
            plans += [
                _Plan(f"{blk}.hc_{part}_fn.weight", (hc_mix, hc_dim), "F32", fill=0.0),
                _Plan(f"{blk}.hc_{part}_base.weight", (hc_mix,), "F32", fill=0.0),
                _Plan(f"{blk}.hc_{part}_scale.weight", (3,), "F32", fill=1.0),
            ]
        plans += [
            _router(spec, il),
            _Plan(f"{blk}.exp_probs_b.bias", (spec.n_expert,), "F32", fill=0.0),
            _Plan(f"{blk}.ffn_norm.weight", (d,), "F32", fill=1.0),
            *_experts(spec, il, fused_gate_up=False),
            _Plan(f"{blk}.ffn_gate_shexp.weight", (f, d), t, std=1.0 / math.sqrt(d)),
            _Plan(f"{blk}.ffn_up_shexp.weight", (f, d), t, std=1.0 / math.sqrt(d)),
            _Plan(f"{blk}.ffn_down_shexp.weight", (d, f), t, std=0.5 / math.sqrt(f)),
        ]
    return plans + _common_tail(spec)


# gemma4 post-norm weights = the rms each branch adds (see _gemma4_plans).
_GEMMA4_ATTN_OUT = 0.25
_GEMMA4_SHARED_OUT = 0.25  # shared FFN, before mixing with the experts' 1.0
_GEMMA4_FFN_OUT = 2.0  # the mixed FFN output against a residual of rms ~1


def moe_layers(spec: SynthSpec) -> list[int]:
    """Layers that have experts: all for qwen3moe; all but the first for gemma4 (as upstream)."""
    if spec.arch == "gemma4" and spec.n_layer > 1:
        return list(range(1, spec.n_layer))
    return list(range(spec.n_layer))


def _gemma4_full_attention_layer(spec: SynthSpec) -> int:
    return min(2, spec.n_layer - 1)


def _silent_token_ids() -> tuple[int, ...]:
    """Tokens whose output row is zero, so greedy decoding never picks them: the specials
    (EOS would end a run early) and bytes outside printable ASCII plus newline, so the noise the
    model writes is at least valid, readable UTF-8."""
    readable = {0x0A, *range(0x20, 0x7F)}
    silent_bytes = [N_SPECIAL + b for b in range(256) if b not in readable]
    return (UNK_ID, BOS_ID, EOS_ID, *silent_bytes)


def _popularity(spec: SynthSpec, il: int) -> tuple[float, ...]:
    """Per-expert router bias for layer `il`: a Zipf-like ladder (0, -log 2, -log 3, ...) over a
    per-layer random order of the experts."""
    rng = np.random.default_rng(np.random.SeedSequence([0x5EED, il]))
    order = rng.permutation(spec.n_expert)
    bias = np.empty(spec.n_expert)
    bias[order] = -np.log1p(np.arange(spec.n_expert))
    return tuple(float(b) for b in bias)


# --- data generation ------------------------------------------------------------------------


def _rng(seed: int, name: str, *parts: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(name.encode()), *parts]))


def _tensor_chunks(plan: _Plan, spec: SynthSpec, seed: int) -> Iterator[np.ndarray]:
    """The tensor's bytes, as arrays to write in order (one per expert for *_exps tensors)."""
    if not plan.per_expert:
        yield _encode(_dense_values(plan, spec, seed), plan.ggml_type)
        return
    slice_shape = plan.shape[1:]
    for e in range(plan.shape[0]):
        if spec.zero_experts:
            yield np.zeros(_nbytes(slice_shape, plan.ggml_type), dtype=np.uint8)
            continue
        parts = [e + 1]
        if spec.corrupt_expert == (plan.layer, e):
            parts.append(_CORRUPT_SALT)
        rng = _rng(seed, plan.name, *parts)
        yield _random_encoded(rng, slice_shape, plan.std, plan.ggml_type)


def _dense_values(plan: _Plan, spec: SynthSpec, seed: int) -> np.ndarray:
    if plan.fill is not None:
        return np.full(plan.shape, plan.fill, dtype=np.float32)
    if plan.churn in ("qk", "v", "o"):
        return _churn_attention(plan, spec, seed)
    if plan.churn == "blind":
        values = np.ones(plan.shape, dtype=np.float32)
        values[list(_shared_coords(spec))] = 0.0
        return values
    if plan.churn == "embd":
        # Token codes plus the shared coordinates every token carries (they feed q and k).
        return _token_part(spec, seed) + _churn_direction(spec)
    else:
        values = _rng(seed, plan.name).standard_normal(plan.shape, dtype=np.float32) * plan.std
    if plan.churn == "output":
        # Anti-tied head: a token already in the stream (the current one, and the recent ones
        # attention copies in) is pushed down, so greedy decoding neither repeats nor cycles.
        tokens = _token_part(spec, seed)
        values -= (spec.repeat_gain / spec.n_embd) * tokens
    if plan.churn == "router":
        # Rows of falling scale, in a per-layer random order of the experts: a wide row wins
        # the top-k more often (a few hot experts, a long tail), without any constant input,
        # and the top slot's weight varies with how far its logit stands out.
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED, plan.layer]))
        scale = np.empty(spec.n_expert)
        scale[rng.permutation(spec.n_expert)] = np.arange(1, spec.n_expert + 1) ** -spec.router_zipf
        scale /= math.sqrt(float(np.mean(scale**2)))
        values *= scale[:, None].astype(np.float32)
    if plan.shared_dir:
        direction = _shared_direction(spec.n_embd, seed)
        bias = np.asarray(plan.row_bias, dtype=np.float32) if plan.row_bias else 1.0
        values += plan.shared_dir * np.multiply.outer(bias, direction).astype(np.float32)
    if plan.zero_rows:
        values[list(plan.zero_rows)] = 0.0
    return values


_N_SHARED_COORDS = 4


def _shared_coords(spec: SynthSpec) -> range:
    return range(min(_N_SHARED_COORDS, spec.n_embd))


def _churn_direction(spec: SynthSpec) -> np.ndarray:
    """The constant every token embedding carries in the churning recipe: a few coordinates of
    as much energy as the token part, so q and k have the same sign for every token."""
    u = np.zeros(spec.n_embd, dtype=np.float32)
    coords = _shared_coords(spec)
    u[list(coords)] = math.sqrt(spec.n_embd / len(coords))
    return u


def _token_basis(spec: SynthSpec, seed: int) -> np.ndarray:
    """Orthonormal rows (kv_dim x n_embd): the subspace that carries token identity. Every
    layer's value projection reads it and its output projection writes back into it, so
    attention copies recent tokens (not noise) into the residual stream."""
    kv_dim = spec.n_head_kv * spec.head_dim
    raw = _rng(seed, "token-basis").standard_normal((spec.n_embd, kv_dim))
    q, _ = np.linalg.qr(raw)
    return q.T.astype(np.float32)


def _token_part(spec: SynthSpec, seed: int) -> np.ndarray:
    """Token embeddings without the shared direction: random vectors inside the token subspace,
    of rms 1 over n_embd like the plain recipe's."""
    basis = _token_basis(spec, seed)
    kv_dim = basis.shape[0]
    z = _rng(seed, "token-codes").standard_normal((VOCAB_SIZE, kv_dim), dtype=np.float32)
    return (z * np.float32(math.sqrt(spec.n_embd / kv_dim))) @ basis


def _churn_attention(plan: _Plan, spec: SynthSpec, seed: int) -> np.ndarray:
    """Attention that looks back over the recent tokens with a fixed, decaying profile.

    q and k read only the shared direction (every token carries it), so they are the same for
    every token: the scores then depend on the distance alone, through RoPE, and fall off with
    it (a recency kernel whose reach `attn_focus` sets). v reads the token subspace and o writes
    it back, so each layer adds a recency-weighted mix of the recent tokens: consecutive tokens
    share most of it (temporal locality in routing) and the output head sees what to avoid."""
    unit = _churn_direction(spec)
    unit /= np.linalg.norm(unit)
    h = spec.head_dim
    if plan.churn == "qk":
        # NEOX rope pairs (i, i + h/2): a unit first element in every pair, the same for q and k,
        # gives score(distance) = sum_i cos(distance * theta_i), largest at distance 0.
        pattern = np.zeros(h, dtype=np.float32)
        pattern[: h // 2] = 1.0
        n_heads = plan.shape[0] // h
        return np.multiply.outer(np.tile(pattern, n_heads), unit).astype(np.float32)
    basis = _token_basis(spec, seed)
    if plan.churn == "v":
        return basis
    # o: query head i reads kv head i // group (ggml's broadcast), and writes it back.
    group = spec.n_head // spec.n_head_kv
    blocks = [basis[(i // group) * h:(i // group + 1) * h].T for i in range(spec.n_head)]
    return (spec.copy_gain / group) * np.concatenate(blocks, axis=1).astype(np.float32)


def _shared_direction(n_embd: int, seed: int) -> np.ndarray:
    return _rng(seed, "shared-direction").standard_normal(n_embd, dtype=np.float32)


def _encode(values: np.ndarray, ggml_type: str) -> np.ndarray:
    """Float values in the storage format of `ggml_type` (the quantized types go by gguf.quants,
    which is exact enough for small dense tensors)."""
    if ggml_type == "F32":
        return values.astype(np.float32)
    if ggml_type == "F16":
        return values.astype(np.float16)
    from gguf import quants  # numpy-only, but slow: used for the small dense tensors alone

    return quants.quantize(values.astype(np.float32), GGMLQuantizationType[ggml_type])


def _random_encoded(
    rng: np.random.Generator, shape: Sequence[int], std: float, ggml_type: str
) -> np.ndarray:
    """Random weights of standard deviation `std`, already in storage format.

    Quantized expert slices are built block by block from random quants and one shared scale:
    a valid encoding of a uniform distribution, made without quantizing gigabytes of floats.
    """
    n = math.prod(shape)
    if ggml_type == "F32":
        return rng.standard_normal(n, dtype=np.float32) * np.float32(std)
    if ggml_type == "F16":
        return (rng.standard_normal(n, dtype=np.float32) * np.float32(std)).astype(np.float16)
    block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType[ggml_type]]
    n_blocks = n // block
    quants = np.frombuffer(rng.bytes(n_blocks * (type_size - 2)), dtype=np.uint8)
    if ggml_type == "Q8_0":
        q_std = math.sqrt((256**2 - 1) / 12)  # int8 uniform over [-128, 127]
    elif ggml_type == "Q4_0":
        q_std = math.sqrt((16**2 - 1) / 12)  # nibble uniform over [0, 15], stored offset by 8
    else:
        raise ValueError(f"no random encoder for {ggml_type}")
    out = np.empty((n_blocks, type_size), dtype=np.uint8)
    out[:, :2] = np.frombuffer(np.float16(std / q_std).tobytes(), dtype=np.uint8)
    out[:, 2:] = quants.reshape(n_blocks, type_size - 2)
    return out.reshape(-1)


def _nbytes(shape: Sequence[int], ggml_type: str) -> int:
    block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType[ggml_type]]
    n = math.prod(shape)
    return n // block * type_size


# --- metadata -------------------------------------------------------------------------------


def _add_metadata(w: GGUFWriter, spec: SynthSpec) -> None:
    w.add_name(spec.name)
    w.add_file_type(int(_FILE_TYPES[spec.expert_type]))
    if spec.expert_type.startswith("Q") or spec.dense_type.startswith("Q"):
        w.add_quantization_version(2)
    w.add_context_length(spec.n_ctx_train)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    if spec.arch == "qwen3moe":
        w.add_feed_forward_length(spec.n_ff_exp * spec.n_expert_used)
    w.add_head_count(spec.n_head)
    if spec.arch == "bailingmoe3":
        _add_bailingmoe3_metadata(w, spec)
    elif spec.arch == "deepseek4":
        _add_deepseek4_metadata(w, spec)
    else:
        w.add_head_count_kv(spec.n_head_kv)
        w.add_key_length(spec.head_dim)
        w.add_value_length(spec.head_dim)
    w.add_layer_norm_rms_eps(spec.rms_eps)
    w.add_rope_freq_base(spec.rope_base)
    w.add_expert_count(spec.n_expert)
    w.add_expert_used_count(spec.n_expert_used)
    w.add_expert_feed_forward_length(spec.n_ff_exp)
    if spec.arch == "gemma4":
        w.add_feed_forward_length(spec.n_ff_shared)  # the dense/shared FFN width
        w.add_key_length_swa(spec.head_dim)
        w.add_value_length_swa(spec.head_dim)
        w.add_rope_freq_base_swa(10000.0)
        # Window = context, so sliding-window layers see what full ones see.
        w.add_sliding_window(spec.n_ctx_train)
        full = _gemma4_full_attention_layer(spec)
        w.add_sliding_window_pattern([il != full for il in range(spec.n_layer)])
        w.add_embedding_length_per_layer_input(0)
        w.add_final_logit_softcapping(30.0)
    _add_vocab(w)


def _add_bailingmoe3_metadata(w: GGUFWriter, spec: SynthSpec) -> None:
    """MLA in llama.cpp's absorbed layout (the KV cache holds the compressed KV plus the rotary
    key), and the keys its loader requires even with no KDA layer: the gguf package does not
    know this architecture yet, so they are written by name."""
    arch = spec.arch
    mla = set(bailingmoe3_mla_layers(spec))
    # Per layer: 1 (MLA's one shared k head) or 0, which marks a KDA recurrent layer.
    w.add_head_count_kv([1 if il in mla else 0 for il in range(spec.n_layer)])
    w.add_key_length(_MLA_KV_LORA + _MLA_ROPE)
    w.add_value_length(_MLA_KV_LORA)
    w.add_uint32(f"{arch}.attention.key_length_mla", _MLA_NOPE + _MLA_ROPE)
    w.add_uint32(f"{arch}.attention.value_length_mla", _MLA_V)
    w.add_uint32(f"{arch}.attention.kv_lora_rank", _MLA_KV_LORA)
    w.add_uint32(f"{arch}.rope.dimension_count", _MLA_ROPE)
    w.add_uint32(f"{arch}.ssm.conv_kernel", _KDA_CONV)
    w.add_uint32(f"{arch}.kda.head_dim", spec.head_dim)
    w.add_float32(f"{arch}.kda.gate_lower_bound", -5.0)
    w.add_feed_forward_length(spec.n_ff_shared)
    w.add_uint32(f"{arch}.expert_shared_feed_forward_length", spec.n_ff_shared)
    w.add_uint32(f"{arch}.expert_shared_count", 1)
    w.add_uint32(f"{arch}.leading_dense_block_count", 0)
    w.add_uint32(f"{arch}.expert_gating_func", 2)  # sigmoid, as Ling's routers
    w.add_bool(f"{arch}.expert_weights_norm", spec.router_norm)
    w.add_float32(f"{arch}.expert_weights_scale", 1.0)


def _add_deepseek4_metadata(w: GGUFWriter, spec: SynthSpec) -> None:
    """The keys llama.cpp's deepseek4 loader requires (by name: the gguf package does not know
    the architecture yet), for the simple form _deepseek4_plans writes."""
    arch = spec.arch
    w.add_head_count_kv(1)
    w.add_key_length(_DSV4_HEAD)
    w.add_value_length(_DSV4_HEAD)
    w.add_feed_forward_length(spec.n_ff_exp)
    w.add_uint32(f"{arch}.rope.dimension_count", _DSV4_ROPE)
    w.add_uint32(f"{arch}.attention.q_lora_rank", _DSV4_Q_LORA)
    w.add_uint32(f"{arch}.attention.sliding_window", spec.n_ctx_train)
    w.add_uint32(f"{arch}.expert_shared_count", 1)
    w.add_float32(f"{arch}.expert_weights_scale", 1.0)
    w.add_bool(f"{arch}.expert_weights_norm", spec.router_norm)
    w.add_float32(f"{arch}.swiglu_clamp_exp", 10.0)
    w.add_uint32(f"{arch}.attention.indexer.head_count", _DSV4_INDEXER_HEADS)
    w.add_uint32(f"{arch}.attention.indexer.key_length", _DSV4_INDEXER_DIM)
    w.add_uint32(f"{arch}.attention.indexer.top_k", 8)
    w.add_uint32(f"{arch}.attention.output_group_count", _DSV4_O_GROUPS)
    w.add_uint32(f"{arch}.attention.output_lora_rank", _DSV4_O_LORA)
    w.add_float32(f"{arch}.attention.compress_rope_freq_base", 10000.0)
    w.add_uint32(f"{arch}.hyper_connection.count", _DSV4_HC)
    w.add_uint32(f"{arch}.hyper_connection.sinkhorn_iterations", 3)
    w.add_float32(f"{arch}.hyper_connection.epsilon", 1e-6)
    w.add_uint32(f"{arch}.hash_layer_count", 0)
    w.add_array(f"{arch}.attention.compress_ratios", deepseek4_compress_ratios(spec))
    w.add_uint32(f"{arch}.expert_gating_func", 4)  # sqrt(softplus), the only one it accepts


def _add_vocab(w: GGUFWriter) -> None:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * VOCAB_SIZE)
    w.add_token_types([int(t) for t in types])
    w.add_unk_token_id(UNK_ID)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    # No leading "▁": prompts and outputs are plain bytes, and "hi" tokenizes to 'h', 'i'.
    w.add_add_space_prefix(False)
    w.add_chat_template(CHATML_TEMPLATE)


# --- validation -----------------------------------------------------------------------------


def _validate(spec: SynthSpec) -> None:
    problems: list[str] = []
    if spec.arch not in ARCHES:
        problems.append(f"arch must be one of {', '.join(ARCHES)}, not {spec.arch!r}")
    for label, t in (("expert_type", spec.expert_type), ("dense_type", spec.dense_type)):
        if t not in WEIGHT_TYPES:
            problems.append(f"{label} must be one of {', '.join(WEIGHT_TYPES)}, not {t!r}")
    for label, v in (("n_layer", spec.n_layer), ("n_embd", spec.n_embd), ("n_head", spec.n_head),
                     ("n_head_kv", spec.n_head_kv), ("head_dim", spec.head_dim),
                     ("n_expert", spec.n_expert), ("n_expert_used", spec.n_expert_used),
                     ("n_ff_exp", spec.n_ff_exp), ("n_ctx_train", spec.n_ctx_train)):
        if v < 1:
            problems.append(f"{label} must be at least 1")
    if spec.n_expert_used > spec.n_expert:
        problems.append("n_expert_used cannot exceed n_expert")
    if spec.n_head % max(spec.n_head_kv, 1):
        problems.append("n_head must be a multiple of n_head_kv")
    if spec.head_dim % 2:
        problems.append("head_dim must be even (rope)")
    if not spec.router_norm and spec.arch not in UNNORMALISED_ARCHES:
        problems.append(f"router_norm=False needs an arch whose loader reads "
                        f"expert_weights_norm ({', '.join(UNNORMALISED_ARCHES)}); llama.cpp "
                        f"always normalises {spec.arch}'s router")
    if spec.churn and spec.arch != "qwen3moe":
        problems.append("the churning recipe (churn) is built for qwen3moe only")
    if spec.churn and spec.n_head_kv * spec.head_dim > spec.n_embd:
        problems.append("churn needs n_head_kv * head_dim <= n_embd (the token subspace)")
    if spec.arch == "deepseek4" and spec.n_layer < 3:
        problems.append("deepseek4 needs at least 3 layers (plain, ratio-4 and ratio-128 "
                        "compressed attention)")
    if spec.arch == "bailingmoe3" and spec.n_layer < 2:
        problems.append("bailingmoe3 needs at least 2 layers (a KDA one and an MLA one)")
    if spec.arch == "gemma4" and spec.n_layer < 2:
        problems.append("gemma4 needs at least 2 layers (the first is dense)")
    quantized = [t for t in (spec.expert_type, spec.dense_type) if t.startswith("Q")]
    rows = (spec.n_embd, spec.n_ff_exp, spec.n_ff_shared, spec.n_head * spec.head_dim)
    if quantized and any(r % 32 for r in rows):
        problems.append("quantized types need n_embd, n_ff_exp, n_ff_shared and n_head*head_dim "
                        "divisible by 32")
    if spec.corrupt_expert is not None:
        il, e = spec.corrupt_expert
        if not (il in moe_layers(spec) and 0 <= e < spec.n_expert):
            problems.append(f"corrupt_expert {spec.corrupt_expert} is outside the expert layers "
                            f"{moe_layers(spec)} x {spec.n_expert} experts")
    if spec.split_max_tensors < 0:
        problems.append("split_max_tensors must be 0 (no split) or positive")
    if problems:
        raise ValueError("invalid synthetic model: " + "; ".join(problems))
