"""An independent numpy forward pass of an F32 qwen3moe GGUF, for the router's weights.

The streamer's trace gives which experts each token routed to, not their weights; this recomputes
the whole routing (ids and final weights) from the file over a token sequence. Its ids are checked
against the engine's trace before its weights are believed. Batch-at-once (teacher forcing), a
few dozen matrix products: no Python per graph node or per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFReader


@dataclass(frozen=True)
class Routing:
    experts: np.ndarray  # (n_layer, n_tokens, k) int
    weights: np.ndarray  # (n_layer, n_tokens, k) final normalised router weights


def _rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope_neox(x: np.ndarray, pos: np.ndarray, base: float) -> np.ndarray:
    """x: (n_tokens, n_heads, h)."""
    h = x.shape[-1]
    theta = base ** (-2.0 * np.arange(h // 2) / h)
    ang = pos[:, None] * theta[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., : h // 2], x[..., h // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def qwen3moe_routing(path: Path, tokens: list[int]) -> Routing:
    r = GGUFReader(path)
    kv = {f.name: f.contents() for f in r.fields.values()}
    t = {x.name: np.asarray(x.data, dtype=np.float64) for x in r.tensors}
    n_layer = kv["qwen3moe.block_count"]
    n_head, n_kv = kv["qwen3moe.attention.head_count"], kv["qwen3moe.attention.head_count_kv"]
    h = kv["qwen3moe.attention.key_length"]
    k = kv["qwen3moe.expert_used_count"]
    eps = kv["qwen3moe.attention.layer_norm_rms_epsilon"]
    base = kv["qwen3moe.rope.freq_base"]
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    x = t["token_embd.weight"][tokens]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    ids_all, w_all = [], []
    for il in range(n_layer):
        b = f"blk.{il}."
        a = _rms(x, t[b + "attn_norm.weight"], eps)
        q = (a @ t[b + "attn_q.weight"].T).reshape(n, n_head, h)
        kk = (a @ t[b + "attn_k.weight"].T).reshape(n, n_kv, h)
        v = (a @ t[b + "attn_v.weight"].T).reshape(n, n_kv, h)
        q = _rope_neox(_rms(q, t[b + "attn_q_norm.weight"], eps), pos, base)
        kk = _rope_neox(_rms(kk, t[b + "attn_k_norm.weight"], eps), pos, base)
        group = n_head // n_kv
        kk, v = np.repeat(kk, group, axis=1), np.repeat(v, group, axis=1)  # head i -> kv i//group
        s = np.einsum("qhd,khd->hqk", q, kk) / np.sqrt(h) + mask
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", p, v).reshape(n, n_head * h)
        x = x + o @ t[b + "attn_output.weight"].T
        f = _rms(x, t[b + "ffn_norm.weight"], eps)
        logits = f @ t[b + "ffn_gate_inp.weight"].T
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ids = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
        w = np.take_along_axis(probs, ids, -1)
        w /= w.sum(-1, keepdims=True)  # qwen3moe normalises the top-k weights
        gate, up, down = (t[b + f"ffn_{n}_exps.weight"] for n in ("gate", "up", "down"))
        out = np.zeros_like(x)
        for slot in range(k):
            e = ids[:, slot]
            g = np.einsum("tfd,td->tf", gate[e], f)
            u = np.einsum("tfd,td->tf", up[e], f)
            hid = g / (1 + np.exp(-g)) * u
            out += w[:, slot, None] * np.einsum("tdf,tf->td", down[e], hid)
        x = x + out
        ids_all.append(ids)
        w_all.append(w)
    return Routing(np.stack(ids_all), np.stack(w_all))
