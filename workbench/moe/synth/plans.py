"""The tensor plan: what a synthetic model's file holds, tensor by tensor, and the building
blocks the architectures share (embeddings, norms, attention, router, experts, output head)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workbench.moe.synth.spec import BOS_ID, EOS_ID, N_SPECIAL, UNK_ID, VOCAB_SIZE, SynthSpec


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
