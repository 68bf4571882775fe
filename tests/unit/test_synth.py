"""The synthetic MoE writer: valid GGUF, reproducible bytes, experts that matter, precise damage.

The model is read back with the gguf package's own GGUFReader (an independent reader). Whether
llama.cpp loads and runs it is checked through the engine in tests/engine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader, TokenType
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize

from workbench.atomic_write import OutputFileError
from workbench.moe.synth import (
    CHATML_TEMPLATE,
    PRESETS,
    VOCAB_SIZE,
    spec_for,
    write_synthetic_moe,
)

TINY = PRESETS["tiny"]
EXPERT_KINDS = ("gate", "up", "down", "gate_up")
KiB, MiB = 1024, 1024 * 1024


def _variants(d: Path, arch: str) -> dict[str, Path]:
    return {
        "clean": write_synthetic_moe(d / "clean.gguf", arch=arch)[0],
        "twin": write_synthetic_moe(d / "twin.gguf", arch=arch)[0],
        "seed1": write_synthetic_moe(d / "seed1.gguf", arch=arch, seed=1)[0],
        "zero": write_synthetic_moe(d / "zero.gguf", arch=arch, zero_experts=True)[0],
        "corrupt": write_synthetic_moe(d / "corrupt.gguf", arch=arch, corrupt_expert=(1, 3))[0],
    }


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The clean tiny qwen3moe, its twin, and its damaged variants, written once."""
    return _variants(tmp_path_factory.mktemp("qwen3moe"), "qwen3moe")


@pytest.fixture(scope="module")
def gemma4_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _variants(tmp_path_factory.mktemp("gemma4"), "gemma4")


@pytest.fixture(params=["qwen3moe", "gemma4"])
def any_arch_models(request: pytest.FixtureRequest) -> dict[str, Path]:
    return request.getfixturevalue("models" if request.param == "qwen3moe" else "gemma4_models")


def _field(reader: GGUFReader, key: str):
    field = reader.get_field(key)
    assert field is not None, f"missing metadata key {key}"
    return field.contents()


def _tensors(path: Path) -> dict[str, np.ndarray]:
    return {t.name: np.asarray(t.data) for t in GGUFReader(path).tensors}


# --- the file ------------------------------------------------------------------------------


def test_tiny_reads_back_as_a_qwen3moe_gguf(models):
    r = GGUFReader(models["clean"])
    assert _field(r, "general.architecture") == "qwen3moe"
    assert _field(r, "qwen3moe.block_count") == TINY.n_layer == 4
    assert _field(r, "qwen3moe.expert_count") == TINY.n_expert == 8
    assert _field(r, "qwen3moe.expert_used_count") == TINY.n_expert_used == 2
    assert _field(r, "qwen3moe.expert_feed_forward_length") == TINY.n_ff_exp
    assert _field(r, "qwen3moe.embedding_length") == TINY.n_embd
    assert _field(r, "tokenizer.chat_template") == CHATML_TEMPLATE
    # 1 embedding + 12 per layer + output norm + output head
    assert len(r.tensors) == 3 + 12 * TINY.n_layer


def test_tiny_vocabulary_is_byte_fallback_spm(models):
    r = GGUFReader(models["clean"])
    tokens = _field(r, "tokenizer.ggml.tokens")
    types = _field(r, "tokenizer.ggml.token_type")
    assert _field(r, "tokenizer.ggml.model") == "llama"
    assert len(tokens) == len(types) == len(_field(r, "tokenizer.ggml.scores")) == VOCAB_SIZE == 259
    assert tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert tokens[3] == "<0x00>" and tokens[3 + 0x41] == "<0x41>" and tokens[-1] == "<0xFF>"
    assert types[:3] == [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
    assert set(types[3:]) == {TokenType.BYTE}
    assert _field(r, "tokenizer.ggml.bos_token_id") == 1
    assert _field(r, "tokenizer.ggml.eos_token_id") == 2
    assert _field(r, "tokenizer.ggml.add_bos_token") is True


def test_tiny_tensor_shapes_are_what_llama_cpp_creates(models):
    # Shapes in ggml order (ne0 first), as llama.cpp's qwen3moe loader asks for them.
    d, f, e, hd = TINY.n_embd, TINY.n_ff_exp, TINY.n_expert, TINY.head_dim
    shapes = {t.name: tuple(int(x) for x in t.shape) for t in GGUFReader(models["clean"]).tensors}
    assert shapes["token_embd.weight"] == (d, VOCAB_SIZE)
    assert shapes["output.weight"] == (d, VOCAB_SIZE)
    assert shapes["output_norm.weight"] == (d,)
    for il in range(TINY.n_layer):
        blk = f"blk.{il}"
        assert shapes[f"{blk}.attn_q.weight"] == (d, TINY.n_head * hd)
        assert shapes[f"{blk}.attn_k.weight"] == (d, TINY.n_head_kv * hd)
        assert shapes[f"{blk}.attn_v.weight"] == (d, TINY.n_head_kv * hd)
        assert shapes[f"{blk}.attn_output.weight"] == (TINY.n_head * hd, d)
        assert shapes[f"{blk}.attn_q_norm.weight"] == (hd,)
        assert shapes[f"{blk}.attn_k_norm.weight"] == (hd,)
        assert shapes[f"{blk}.ffn_gate_inp.weight"] == (d, e)
        assert shapes[f"{blk}.ffn_gate_exps.weight"] == (d, f, e)
        assert shapes[f"{blk}.ffn_up_exps.weight"] == (d, f, e)
        assert shapes[f"{blk}.ffn_down_exps.weight"] == (f, d, e)


def test_same_seed_same_bytes_other_seed_other_bytes(any_arch_models):
    clean = any_arch_models["clean"].read_bytes()
    assert clean == any_arch_models["twin"].read_bytes()
    assert clean != any_arch_models["seed1"].read_bytes()


def test_tiny_size_is_a_few_mib_with_evictable_experts(models):
    size = models["clean"].stat().st_size
    assert 2 * MiB < size < 12 * MiB
    assert 100 * KiB <= TINY.expert_bytes <= 200 * KiB
    # 32 experts in all but 8 per token (4 layers x top-2): a cache of a few experts must evict.
    assert TINY.n_layer * TINY.n_expert >= 4 * TINY.n_layer * TINY.n_expert_used


def test_gemma4_has_a_dense_first_layer_and_fused_experts(gemma4_models):
    r = GGUFReader(gemma4_models["clean"])
    assert _field(r, "general.architecture") == "gemma4"
    assert _field(r, "gemma4.expert_count") == 8
    assert _field(r, "gemma4.expert_used_count") == 2
    assert _field(r, "gemma4.attention.sliding_window") == TINY.n_ctx_train
    assert _field(r, "gemma4.attention.sliding_window_pattern") == [True, True, False, True]
    assert _field(r, "gemma4.embedding_length_per_layer_input") == 0
    d, f, e = TINY.n_embd, TINY.n_ff_exp, TINY.n_expert
    shapes = {t.name: tuple(int(x) for x in t.shape) for t in r.tensors}
    assert shapes["rope_freqs.weight"] == (TINY.head_dim // 2,)
    assert "blk.0.ffn_gate_inp.weight" not in shapes  # layer 0 is dense
    assert shapes["blk.0.ffn_gate.weight"] == (d, TINY.n_ff_shared)
    for il in range(1, TINY.n_layer):
        blk = f"blk.{il}"
        assert shapes[f"{blk}.ffn_gate_inp.weight"] == (d, e)
        assert shapes[f"{blk}.ffn_gate_inp.scale"] == (d,)
        assert shapes[f"{blk}.ffn_gate_up_exps.weight"] == (d, 2 * f, e)
        assert shapes[f"{blk}.ffn_down_exps.weight"] == (f, d, e)
        for norm in ("pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2", "post_ffw_norm"):
            assert shapes[f"{blk}.{norm}.weight"] == (d,)
        assert f"{blk}.ffn_gate_exps.weight" not in shapes


def test_split_output_puts_metadata_alone_in_the_first_shard(tmp_path, models):
    files = write_synthetic_moe(tmp_path / "m.gguf", split_max_tensors=20)
    assert [p.name for p in files] == [f"m-{i:05d}-of-00004.gguf" for i in range(1, 5)]
    readers = [GGUFReader(p) for p in files]
    assert [len(r.tensors) for r in readers] == [0, 20, 20, 11]
    assert [_field(r, "split.no") for r in readers] == [0, 1, 2, 3]
    assert {_field(r, "split.count") for r in readers} == {4}
    assert _field(readers[0], "general.architecture") == "qwen3moe"
    # Same tensors, same bytes as the single-file model.
    whole = _tensors(models["clean"])
    parts = {t.name: np.asarray(t.data) for r in readers for t in r.tensors}
    assert parts.keys() == whole.keys()
    assert all(np.array_equal(parts[k], whole[k]) for k in whole)


# --- damage for negative controls ----------------------------------------------------------


def test_zero_experts_zeroes_every_expert_and_nothing_else(any_arch_models):
    clean, zero = _tensors(any_arch_models["clean"]), _tensors(any_arch_models["zero"])
    assert clean.keys() == zero.keys()
    for name in clean:
        if "_exps." in name:
            assert not zero[name].any(), name
            assert clean[name].any(), name
        else:
            assert np.array_equal(clean[name], zero[name]), name


def test_corrupt_expert_changes_exactly_that_expert_slice(any_arch_models):
    clean_bytes = np.fromfile(any_arch_models["clean"], dtype=np.uint8)
    bad_bytes = np.fromfile(any_arch_models["corrupt"], dtype=np.uint8)
    assert clean_bytes.size == bad_bytes.size
    changed = np.flatnonzero(clean_bytes != bad_bytes)
    assert changed.size > 0

    # Every changed byte lies inside layer 1 / expert 3 of its expert tensors (gate, up, down or
    # fused gate_up), and each of those slices did change.
    allowed = np.zeros(clean_bytes.size, dtype=bool)
    slices = 0
    for t in GGUFReader(any_arch_models["clean"]).tensors:
        if t.name in {f"blk.1.ffn_{k}_exps.weight" for k in EXPERT_KINDS}:
            slices += 1
            stride = t.n_bytes // TINY.n_expert
            start = t.data_offset + 3 * stride
            allowed[start:start + stride] = True
            assert (clean_bytes[start:start + stride] != bad_bytes[start:start + stride]).any()
    assert slices in (2, 3)
    assert allowed[changed].all()


# --- experts matter ------------------------------------------------------------------------


def _rms_norm(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x) + eps)


def _first_token_logits(w: dict[str, np.ndarray], token: int) -> tuple[np.ndarray, set]:
    """A numpy qwen3moe forward pass for a lone token at position 0 (attention over one
    position is its value vector, so rope and q/k drop out). Returns logits and the
    (layer, expert) pairs routed to."""
    spec = TINY
    group = spec.n_head // spec.n_head_kv
    x = w["token_embd.weight"][token].astype(np.float64)
    used = set()
    for il in range(spec.n_layer):
        b = f"blk.{il}."
        h = _rms_norm(x) * w[b + "attn_norm.weight"]
        v = (w[b + "attn_v.weight"] @ h).reshape(spec.n_head_kv, spec.head_dim)
        x = x + w[b + "attn_output.weight"] @ np.concatenate(
            [v[i // group] for i in range(spec.n_head)])
        h = _rms_norm(x) * w[b + "ffn_norm.weight"]
        router = w[b + "ffn_gate_inp.weight"] @ h
        probs = np.exp(router - router.max())
        top = np.argsort(-probs)[: spec.n_expert_used]
        weights = probs[top] / probs[top].sum()
        for e, weight in zip(top, weights, strict=True):
            used.add((il, int(e)))
            gate = w[b + "ffn_gate_exps.weight"][e] @ h
            up = w[b + "ffn_up_exps.weight"][e] @ h
            x = x + weight * (w[b + "ffn_down_exps.weight"][e] @ (gate / (1 + np.exp(-gate)) * up))
    return w["output.weight"] @ (_rms_norm(x) * w["output_norm.weight"]), used


READABLE = [3 + b for b in range(0x20, 0x7F)]


def test_zeroing_the_experts_changes_the_logits_and_the_choices(models):
    clean = {k: v.astype(np.float64) for k, v in _tensors(models["clean"]).items()}
    zero = {k: v.astype(np.float64) for k, v in _tensors(models["zero"]).items()}
    moved, same_choice = [], 0
    for token in READABLE:
        a, _ = _first_token_logits(clean, token)
        b, _ = _first_token_logits(zero, token)
        moved.append(np.abs(a - b).max() / np.abs(a).max())
        same_choice += int(a.argmax() == b.argmax())
    # The tiny random-init pitfall moved logits by ~1e-6; here they move by their own size.
    assert np.median(moved) > 0.3
    assert same_choice < len(READABLE) // 2


def test_a_corrupted_expert_changes_the_output_only_where_it_is_routed(models):
    clean = {k: v.astype(np.float64) for k, v in _tensors(models["clean"]).items()}
    bad = {k: v.astype(np.float64) for k, v in _tensors(models["corrupt"]).items()}
    routed, not_routed = [], []
    for token in READABLE:
        a, used = _first_token_logits(clean, token)
        b, _ = _first_token_logits(bad, token)
        (routed if (1, 3) in used else not_routed).append(np.abs(a - b).max())
    assert routed and not_routed
    assert min(routed) > 0.1
    assert max(not_routed) == 0.0


def test_greedy_next_tokens_vary_and_stay_readable(models):
    w = {k: v.astype(np.float64) for k, v in _tensors(models["clean"]).items()}
    choices = [int(_first_token_logits(w, t)[0].argmax()) for t in READABLE]
    assert len(set(choices)) > 20  # not one token repeated
    assert set(choices) <= set(READABLE) | {3 + 0x0A}  # printable ASCII or newline, never EOS


# --- quantized and bench-shaped variants ---------------------------------------------------


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0"])
def test_quantized_experts_decode_to_the_intended_scale(tmp_path, qtype):
    path = write_synthetic_moe(tmp_path / "q.gguf", expert_type=qtype, dense_type="Q8_0")[0]
    spec = spec_for(expert_type=qtype, dense_type="Q8_0")
    tensors = {t.name: t for t in GGUFReader(path).tensors}
    gate = tensors["blk.0.ffn_gate_exps.weight"]
    assert gate.tensor_type == GGMLQuantizationType[qtype]
    assert gate.n_bytes == spec.n_expert * spec.expert_bytes // 3
    assert tensors["blk.0.attn_q.weight"].tensor_type == GGMLQuantizationType.Q8_0
    assert tensors["blk.0.ffn_gate_inp.weight"].tensor_type == GGMLQuantizationType.F32
    values = dequantize(np.asarray(gate.data), GGMLQuantizationType[qtype])
    assert values.shape == (spec.n_expert, spec.n_ff_exp, spec.n_embd)
    intended = spec.expert_gain / np.sqrt(spec.n_embd)
    assert values.std() == pytest.approx(intended, rel=0.1)
    assert path.stat().st_size < TINY.n_layer * TINY.layer_expert_bytes  # smaller than F32


def test_bench_preset_has_real_expert_sizes_and_follows_target_gib():
    bench = spec_for(size="bench")
    # One Q4_0 expert of a 2048-wide model with 768-wide experts: ~2.5 MiB, as in Qwen3-30B-A3B.
    assert bench.expert_bytes == 3 * 2048 * 768 // 32 * 18
    assert bench.n_layer * bench.layer_expert_bytes == pytest.approx(2 * 2**30, rel=0.2)
    bigger = spec_for(size="bench", target_gib=8.0)
    assert bigger.n_layer > bench.n_layer
    assert spec_for(size="bench", n_layer=3).n_layer == 3  # explicit layers beat the target
    assert spec_for(arch="gemma4", size="bench").n_layer == bench.n_layer + 1  # + dense layer 0
    with pytest.raises(ValueError, match="not both"):
        spec_for(size="bench", n_layer=3, target_gib=1.0)


def test_small_bench_shaped_model_writes_and_reads_back(tmp_path):
    path = write_synthetic_moe(tmp_path / "b.gguf", size="bench", n_layer=1,
                               n_expert=4, n_expert_used=2, router_skew=2.0)[0]
    r = GGUFReader(path)
    assert _field(r, "qwen3moe.expert_count") == 4
    down = next(t for t in r.tensors if t.name == "blk.0.ffn_down_exps.weight")
    assert down.tensor_type == GGMLQuantizationType.Q4_0
    assert tuple(int(x) for x in down.shape) == (768, 2048, 4)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"colour": "blue"}, "unknown option"),
        ({"corrupt_expert": (4, 0)}, "outside"),
        ({"arch": "gemma4", "corrupt_expert": (0, 1)}, "outside"),  # its layer 0 is dense
        ({"arch": "llama"}, "arch must be one of"),
        ({"n_expert_used": 9}, "cannot exceed"),
        ({"expert_type": "Q5_K"}, "expert_type"),
        ({"expert_type": "Q8_0", "n_embd": 120}, "divisible by 32"),
    ],
)
def test_invalid_options_are_refused_before_writing(tmp_path, overrides, message):
    target = tmp_path / "never.gguf"
    with pytest.raises(ValueError, match=message):
        write_synthetic_moe(target, **overrides)
    assert not target.exists()


def test_split_model_appears_whole_in_its_directory(tmp_path):
    """The shards are staged and renamed in: only the finished files are in the directory."""
    files = write_synthetic_moe(tmp_path / "m.gguf", split_max_tensors=20)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files)


def test_a_missing_directory_is_not_created(tmp_path):
    """Issue 12, case 11: make-model created missing parent directories (anywhere, as root)."""
    with pytest.raises(OutputFileError, match="does not exist: create it first"):
        write_synthetic_moe(tmp_path / "new" / "dir" / "m.gguf")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("split", [0, 20])
def test_a_full_disk_leaves_no_model_behind(tmp_path, monkeypatch, split):
    """Issue 12, case 11: make-model on a full disk gave a traceback and left a 0-byte file.

    The gguf package's writer opens its files with the builtin open(); here they are real files
    on a disk that is full after 100 KiB each (tests/full_disk.py), so the first shard fails
    half-written. Nothing is left, and an earlier model of that name is untouched."""
    import io

    import gguf.gguf_writer

    from tests.full_disk import FullDisk

    disk = type("FullDisk", (FullDisk,), {"budget": 100 << 10})
    monkeypatch.setattr(gguf.gguf_writer, "open",
                        lambda name, mode: io.BufferedWriter(disk(name, mode)), raising=False)
    earlier = tmp_path / "m.gguf"
    earlier.write_bytes(b"an earlier model")
    with pytest.raises(OutputFileError) as caught:
        write_synthetic_moe(earlier, split_max_tensors=split)
    assert "the disk is full" in str(caught.value)
    assert "the earlier file of that name is unchanged" in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]
    assert earlier.read_bytes() == b"an earlier model"


# --- the churning bench recipe ---------------------------------------------------------------


def test_bench_is_the_churning_recipe_at_about_two_gib_of_experts():
    spec = spec_for("qwen3moe", "bench")
    assert spec.churn and spec.arch == "qwen3moe"
    experts = spec.n_layer * spec.layer_expert_bytes
    assert 1.8 * 2**30 < experts < 2.2 * 2**30  # whole layers: 1.9 GiB


def test_other_archs_keep_the_plain_bench_recipe_and_churn_elsewhere_is_refused():
    assert not spec_for("gemma4", "bench").churn
    with pytest.raises(ValueError, match="churning recipe"):
        spec_for("gemma4", "bench", churn=True)


def test_churn_files_are_reproducible_and_seeded(tmp_path):
    small = dict(n_layer=2, n_embd=128, n_head=4, n_head_kv=2, head_dim=32, n_expert=8,
                 n_ff_exp=64, expert_type="F32", dense_type="F32")
    a = write_synthetic_moe(tmp_path / "a.gguf", size="bench", **small)[0]
    b = write_synthetic_moe(tmp_path / "b.gguf", size="bench", **small)[0]
    c = write_synthetic_moe(tmp_path / "c.gguf", size="bench", seed=1, **small)[0]
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    t = _tensors(a)
    # The feed-forward and output norms hide the shared q/k coordinates; attention norms don't.
    ffn_norm = t["blk.0.ffn_norm.weight"]
    assert (ffn_norm[:4] == 0).all() and (ffn_norm[4:] == 1).all()
    assert (t["blk.0.attn_norm.weight"] == 1).all()
    # v reads an orthonormal token subspace (kv_dim x n_embd rows).
    v = t["blk.0.attn_v.weight"].astype(np.float64)
    assert np.allclose(v @ v.T, np.eye(v.shape[0]), atol=1e-5)


# --- the other architectures ------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["bailingmoe3", "deepseek4"])
def test_new_archs_read_back_with_split_experts_and_the_keys_their_loader_needs(tmp_path, arch):
    path = write_synthetic_moe(tmp_path / f"{arch}.gguf", arch=arch)[0]
    r = GGUFReader(path)
    assert _field(r, "general.architecture") == arch
    assert _field(r, f"{arch}.expert_count") == TINY.n_expert
    assert _field(r, f"{arch}.expert_shared_count") == 1
    names = {t.name for t in r.tensors}
    for il in range(TINY.n_layer):
        for kind in ("gate", "up", "down"):
            assert f"blk.{il}.ffn_{kind}_exps.weight" in names
            assert f"blk.{il}.ffn_{kind}_shexp.weight" in names
        assert f"blk.{il}.exp_probs_b.bias" in names


def test_bailingmoe3_mixes_kda_and_mla_layers(tmp_path):
    path = write_synthetic_moe(tmp_path / "b.gguf", arch="bailingmoe3")[0]
    r = GGUFReader(path)
    kv = list(_field(r, "bailingmoe3.attention.head_count_kv"))
    assert kv == [0, 0, 0, 1]  # 0 marks KDA; the last layer is MLA
    names = {t.name for t in r.tensors}
    assert "blk.0.ssm_conv1d_q.weight" in names and "blk.3.attn_kv_a_mqa.weight" in names


def test_deepseek4_has_both_compressed_attention_kinds(tmp_path):
    path = write_synthetic_moe(tmp_path / "d.gguf", arch="deepseek4")[0]
    r = GGUFReader(path)
    assert list(_field(r, "deepseek4.attention.compress_ratios")) == [0, 4, 128, 0]
    names = {t.name for t in r.tensors}
    assert "blk.1.indexer.proj.weight" in names and "blk.2.attn_compressor_kv.weight" in names
    assert "blk.2.indexer.proj.weight" not in names
    with pytest.raises(ValueError, match="at least 3 layers"):
        spec_for("deepseek4", "tiny", n_layer=2)
