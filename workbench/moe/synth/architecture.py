"""The one small interface every architecture of synthetic model implements: what tensors its
file holds and what metadata its llama.cpp loader reads, plus the few facts validation and the
size presets need. A module in `synth/arch/` defines `ARCH = Architecture(...)`; the package
finds it there (arch/__init__.py), so adding an architecture is adding that one file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gguf import GGUFWriter

from workbench.moe.synth.plans import _Plan
from workbench.moe.synth.spec import SynthSpec

Metadata = Callable[[GGUFWriter, SynthSpec], None]


def all_layers(spec: SynthSpec) -> list[int]:
    return list(range(spec.n_layer))


def gqa_metadata(w: GGUFWriter, spec: SynthSpec) -> None:
    """Grouped-query attention's keys: what most architectures write."""
    w.add_head_count_kv(spec.n_head_kv)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)


def _nothing(w: GGUFWriter, spec: SynthSpec) -> None:
    pass


def _no_problems(spec: SynthSpec) -> list[str]:
    return []


@dataclass(frozen=True)
class Architecture:
    name: str  # general.architecture, and the name `--arch` takes
    rank: int  # its place in ARCHES (the CLI's order; the first is the default)
    plans: Callable[[SynthSpec], list[_Plan]]  # what tensors, in file order
    # The metadata, written where the common keys leave room for it (the order is the file's):
    head_metadata: Metadata = _nothing  # after block_count
    attention_metadata: Metadata = gqa_metadata  # after head_count
    tail_metadata: Metadata = _nothing  # after the expert counts, before the vocabulary
    moe_layers: Callable[[SynthSpec], list[int]] = all_layers  # layers that have experts
    problems: Callable[[SynthSpec], list[str]] = _no_problems  # its own validation
    dense_leading_layers: int = 0  # layers without experts (spec_for's size target adds them)
    churns: bool = False  # the churning recipe (SynthSpec.churn) is built for it
    # Its loader reads `expert_weights_norm`, so SynthSpec.router_norm=False leaves the router's
    # top-k weights unnormalised (its tail_metadata writes the key from the spec).
    reads_weights_norm: bool = False
