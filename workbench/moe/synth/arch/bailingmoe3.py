"""bailingmoe3 (Ling 3): KDA and MLA attention layers, routers with a selection bias, routed
experts and one shared expert."""

from __future__ import annotations

import math

from gguf import GGUFWriter

from workbench.moe.synth.architecture import Architecture
from workbench.moe.synth.plans import _common_head, _common_tail, _experts, _Plan, _router
from workbench.moe.synth.spec import SynthSpec

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


def _problems(spec: SynthSpec) -> list[str]:
    if spec.n_layer < 2:
        return ["bailingmoe3 needs at least 2 layers (a KDA one and an MLA one)"]
    return []


ARCH = Architecture("bailingmoe3", rank=2, plans=_bailingmoe3_plans,
                    attention_metadata=_add_bailingmoe3_metadata, problems=_problems,
                    reads_weights_norm=True)
