"""What shapes a synthetic model: the spec, its size presets and the fixed vocabulary."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

SIZES: tuple[str, ...] = ("tiny", "bench")
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
    # rescaling them to sum to 1 (gguf `<arch>.expert_weights_norm`). Only architectures whose
    # loader reads that key take it (Architecture.reads_weights_norm); llama.cpp always
    # normalises the others. Dropping's rules (the pinned top expert, renormalisation to the
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
        # Calibrated to real routing (issue 35): the upstream engine's Qwen3-30B-A3B trace
        # (route_stats.REAL_QWEN3_30B; `bench stream --which routing` prints each figure
        # beside it). A flat router (top slot ~0.24 at k=8, a third of the other slots below
        # 0.75/k holding ~17 % of the weight), mild popularity skew, and attention that copies
        # the recent tokens strongly enough for real temporal locality: the LRU hit rate at
        # 1.5/2/3/5x one token's demand is 34-37/48-52/65-66/85 % against the trace's
        # 38.5/47.6/63.4/79.0. What it cannot match: its favourite experts do not move with
        # the text (kept 0.81-0.89 against 0.62), since its byte text's mix is stationary.
        # The recipe before it (router gain 3.0, skew 0.4, copy gain 1.0) was sharp (top slot
        # 0.75, 88 % of the other slots below 0.75/k) and flattered dropping and eviction;
        # figures in docs/benchmarks.md marked "sharp router" were measured on it.
        router_gain=0.8,
        router_zipf=0.2,
        copy_gain=1.5,
        down_gain=3.0,
        target_gib=2.0,
    ),
}


def _nbytes(shape: Sequence[int], ggml_type: str) -> int:
    block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType[ggml_type]]
    n = math.prod(shape)
    return n // block * type_size
