"""gemma4: a dense first layer, then MoE layers with a shared FFN beside the routed experts
(fused gate+up), sandwich norms, sliding-window attention with one full layer."""

from __future__ import annotations

import math

from gguf import GGUFWriter

from workbench.moe.synth.architecture import Architecture
from workbench.moe.synth.plans import _attention, _common_tail, _experts, _Plan, _router
from workbench.moe.synth.spec import VOCAB_SIZE, SynthSpec


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


# gemma4 post-norm weights = the rms each branch adds (see _gemma4_plans).
_GEMMA4_ATTN_OUT = 0.25
_GEMMA4_SHARED_OUT = 0.25  # shared FFN, before mixing with the experts' 1.0
_GEMMA4_FFN_OUT = 2.0  # the mixed FFN output against a residual of rms ~1


def moe_layers(spec: SynthSpec) -> list[int]:
    """All layers but the first, which is dense (as upstream)."""
    if spec.n_layer > 1:
        return list(range(1, spec.n_layer))
    return list(range(spec.n_layer))


def _gemma4_full_attention_layer(spec: SynthSpec) -> int:
    return min(2, spec.n_layer - 1)


def _tail_metadata(w: GGUFWriter, spec: SynthSpec) -> None:
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


def _problems(spec: SynthSpec) -> list[str]:
    if spec.n_layer < 2:
        return ["gemma4 needs at least 2 layers (the first is dense)"]
    return []


ARCH = Architecture("gemma4", rank=1, plans=_gemma4_plans, tail_metadata=_tail_metadata,
                    moe_layers=moe_layers, problems=_problems, dense_leading_layers=1)
