"""The tensors' values: reproducible random weights (one generator per tensor and per expert
slice), the churning recipe's constructions, and their storage encodings."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from workbench.moe.synth.plans import _Plan
from workbench.moe.synth.spec import _CORRUPT_SALT, VOCAB_SIZE, SynthSpec, _nbytes


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
