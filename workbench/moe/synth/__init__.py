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

The package: `spec.py` (SynthSpec, the size presets, the vocabulary), `plans.py` (the tensor
plan and its shared building blocks), `arch/` (one module per architecture behind the small
interface of `architecture.py`: what tensors, what metadata), `values.py` (the weights),
`validation.py`, `writer.py`. Adding an architecture is one module in `arch/`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from workbench.moe.synth.arch import ARCHES, ARCHITECTURES, moe_layers
from workbench.moe.synth.arch.bailingmoe3 import bailingmoe3_mla_layers
from workbench.moe.synth.arch.deepseek4 import deepseek4_compress_ratios
from workbench.moe.synth.spec import (
    BOS_ID,
    CHATML_TEMPLATE,
    EOS_ID,
    N_SPECIAL,
    PRESETS,
    SIZES,
    UNK_ID,
    VOCAB_SIZE,
    WEIGHT_TYPES,
    SynthSpec,
)
from workbench.moe.synth.validation import _validate
from workbench.moe.synth.writer import write_spec

__all__ = [
    "ARCHES", "BOS_ID", "CHATML_TEMPLATE", "EOS_ID", "N_SPECIAL", "PRESETS", "SIZES", "UNK_ID",
    "VOCAB_SIZE", "WEIGHT_TYPES", "SynthSpec", "bailingmoe3_mla_layers",
    "deepseek4_compress_ratios", "moe_layers", "spec_for", "write_spec", "write_synthetic_moe",
]


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
    known = ARCHITECTURES.get(arch)
    if preset.churn and not (known and known.churns) and "churn" not in overrides:
        # The churning recipe is qwen3moe's; other archs keep the plain bench recipe.
        preset = dataclasses.replace(preset, churn=False, router_skew=1.0, router_gain=2.0,
                                     router_zipf=0.2, down_gain=4.0, rope_base=1e6)
    spec = dataclasses.replace(preset, arch=arch, **overrides)
    if spec.target_gib is not None:
        n_layer = max(1, round(spec.target_gib * 2**30 / spec.layer_expert_bytes))
        if known is not None:
            n_layer += known.dense_leading_layers  # gemma4's first layer is dense
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
