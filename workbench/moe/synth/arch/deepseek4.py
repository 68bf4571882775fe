"""deepseek4 (DeepSeek V4): low-rank q, one shared kv head, compressed attention on some layers,
hyper-connections, routed experts and one shared expert."""

from __future__ import annotations

import math

from gguf import GGUFWriter

from workbench.moe.synth.architecture import Architecture
from workbench.moe.synth.plans import _common_head, _common_tail, _experts, _Plan, _router
from workbench.moe.synth.spec import SynthSpec

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


def _problems(spec: SynthSpec) -> list[str]:
    if spec.n_layer < 3:
        return ["deepseek4 needs at least 3 layers (plain, ratio-4 and ratio-128 compressed "
                "attention)"]
    return []


ARCH = Architecture("deepseek4", rank=3, plans=_deepseek4_plans,
                    attention_metadata=_add_deepseek4_metadata, problems=_problems,
                    reads_weights_norm=True)
