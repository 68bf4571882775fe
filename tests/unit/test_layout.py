"""GGUF header facts and expert offsets, on the synthetic MoE, a split copy of it, and the real
embedded gemma-3-270m; plus every way a model file can be unusable."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

from workbench.moe.layout import (
    ModelFileError,
    expert_tensors,
    format_facts,
    read_model_facts,
    read_tensors,
)
from workbench.moe.synth import CHATML_TEMPLATE, PRESETS, write_synthetic_moe

TINY = PRESETS["tiny"]


@pytest.fixture(scope="module")
def split_moe(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The tiny model (same seed as tiny_moe_path) in 4 shards, the first holding metadata only."""
    return write_synthetic_moe(tmp_path_factory.mktemp("split") / "tiny.gguf", split_max_tensors=20)


# --- the synthetic MoE ---------------------------------------------------------------------


def test_facts_of_the_synthetic_moe(tiny_moe_path):
    facts = read_model_facts(tiny_moe_path)
    assert facts.arch == "qwen3moe"
    assert facts.name == TINY.name
    assert facts.is_moe
    assert (facts.n_layer, facts.n_embd, facts.n_expert, facts.n_expert_used) == (4, 128, 8, 2)
    assert facts.n_ctx_train == TINY.n_ctx_train
    assert facts.file_type == facts.dominant_type == "F32"
    assert facts.has_chat_template and facts.chat_template == CHATML_TEMPLATE
    assert (facts.bos_token_id, facts.eos_token_id, facts.vocab_size) == (1, 2, 259)
    assert facts.n_tensors == 51
    assert facts.expert_bytes == TINY.n_layer * TINY.layer_expert_bytes
    assert facts.n_expert_layers == TINY.n_layer
    assert facts.file_size == tiny_moe_path.stat().st_size
    assert facts.shards == (tiny_moe_path,)


def test_facts_and_offsets_agree_with_gguf_reader(tiny_moe_path):
    reader = GGUFReader(tiny_moe_path)
    facts = read_model_facts(tiny_moe_path)
    assert facts.n_params == sum(t.n_elements for t in reader.tensors)
    assert facts.tensor_bytes == sum(t.n_bytes for t in reader.tensors)
    ours = {t.name: t for t in read_tensors(tiny_moe_path)}
    assert len(ours) == len(reader.tensors)
    for t in reader.tensors:
        mine = ours[t.name]
        assert mine.offset == t.data_offset, t.name
        assert mine.n_bytes == t.n_bytes, t.name
        assert mine.shape == tuple(int(x) for x in t.shape), t.name
        assert mine.ggml_type == t.tensor_type.name, t.name


def test_expert_tensors_locate_every_expert_slice(tiny_moe_path):
    experts = expert_tensors(tiny_moe_path)
    assert [(e.layer, e.kind) for e in experts] == [
        (il, kind) for il in range(TINY.n_layer) for kind in ("gate", "up", "down")]
    data = {t.name: np.asarray(t.data) for t in GGUFReader(tiny_moe_path).tensors}
    raw = tiny_moe_path.read_bytes()
    for e in experts:
        assert e.n_expert == TINY.n_expert
        assert e.expert_stride * e.n_expert == e.n_bytes == TINY.expert_bytes // 3 * TINY.n_expert
        for x in (0, 5, TINY.n_expert - 1):
            start = e.expert_offset(x)
            assert raw[start:start + e.expert_stride] == data[e.name][x].tobytes()
    with pytest.raises(IndexError):
        experts[0].expert_offset(TINY.n_expert)


def test_a_split_model_reads_as_one_with_offsets_into_each_shard(split_moe, tiny_moe_path):
    first = split_moe[0]
    assert [p.name for p in split_moe] == [f"tiny-{i:05d}-of-00004.gguf" for i in range(1, 5)]
    facts = read_model_facts(first)
    whole = read_model_facts(tiny_moe_path)
    assert facts.n_shards == 4 and facts.shards == tuple(split_moe)
    assert facts.file_size == sum(p.stat().st_size for p in split_moe)
    for field in ("arch", "n_params", "n_tensors", "tensor_bytes", "expert_bytes", "n_expert",
                  "chat_template", "vocab_size"):
        assert getattr(facts, field) == getattr(whole, field), field

    raw_whole = tiny_moe_path.read_bytes()
    unsplit = {e.name: e for e in expert_tensors(tiny_moe_path)}
    split = expert_tensors(first)
    assert {e.shard for e in split} == {1, 2, 3}  # shard 0 holds metadata only
    for e in split:
        assert e.path == split_moe[e.shard]
        with e.path.open("rb") as f:
            f.seek(e.offset)
            in_shard = f.read(e.n_bytes)
        ref = unsplit[e.name]
        assert in_shard == raw_whole[ref.offset:ref.offset + ref.n_bytes], e.name


def test_format_facts_summarises_a_moe(tiny_moe_path):
    text = format_facts(read_model_facts(tiny_moe_path))
    assert "qwen3moe" in text
    assert "8 per layer, 2 used per token" in text
    assert "259 tokens" in text
    assert "chat template  yes" in text


def test_facts_of_a_gemma4_with_a_dense_first_layer(tmp_path):
    path = write_synthetic_moe(tmp_path / "g4.gguf", arch="gemma4")[0]
    facts = read_model_facts(path)
    assert facts.arch == "gemma4" and facts.is_moe
    assert (facts.n_layer, facts.n_expert_layers) == (4, 3)
    experts = expert_tensors(path)
    assert [(e.layer, e.kind) for e in experts] == [
        (il, kind) for il in (1, 2, 3) for kind in ("gate_up", "down")]
    gate_up = experts[0]
    assert gate_up.shape == (TINY.n_embd, 2 * TINY.n_ff_exp, TINY.n_expert)
    assert gate_up.expert_stride == 2 * TINY.n_embd * TINY.n_ff_exp * 4  # F32
    assert "8 per layer in 3 of 4 layers" in format_facts(facts)


# --- the real embedded model ---------------------------------------------------------------


def test_facts_of_the_embedded_gemma3(embedded_model_path):
    facts = read_model_facts(embedded_model_path)
    assert facts.arch == "gemma3"
    assert not facts.is_moe
    assert (facts.n_expert, facts.n_expert_used, facts.expert_bytes) == (0, 0, 0)
    assert facts.n_expert_layers == 0
    assert (facts.n_layer, facts.n_embd) == (18, 640)
    assert facts.file_type == "Q4_K_M"
    assert facts.vocab_size == 262144
    assert (facts.bos_token_id, facts.eos_token_id) == (2, 1)
    assert facts.n_ctx_train == 32768
    assert facts.n_tensors == 236
    assert 250e6 < facts.n_params < 300e6
    assert facts.tensor_bytes < facts.file_size == embedded_model_path.stat().st_size
    assert expert_tensors(embedded_model_path) == []
    assert "none (dense model)" in format_facts(facts)


# --- unusable files ------------------------------------------------------------------------


def _error(path: Path) -> str:
    with pytest.raises(ModelFileError) as info:
        read_model_facts(path)
    return str(info.value)


def test_missing_file(tmp_path):
    assert "no model file at" in _error(tmp_path / "nowhere.gguf")


def test_a_folder_is_not_a_model(tmp_path):
    assert "is a folder" in _error(tmp_path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.gguf"
    path.touch()
    assert "is empty" in _error(path)


def test_random_bytes_are_not_a_gguf(tmp_path):
    path = tmp_path / "noise.gguf"
    path.write_bytes(np.random.default_rng(7).bytes(4096))
    message = _error(path)
    assert "noise.gguf is not a GGUF model" in message


def _truncated_copy(source: Path, target: Path, n_bytes: int) -> Path:
    with source.open("rb") as f:
        target.write_bytes(f.read(n_bytes))
    return target


def test_real_gguf_cut_inside_the_tensor_data(embedded_model_path, tmp_path):
    path = _truncated_copy(embedded_model_path, tmp_path / "cut.gguf", 16 * 2**20)
    message = _error(path)
    assert "cut.gguf is truncated" in message and "fetch it again" in message


def test_real_gguf_cut_inside_the_header(embedded_model_path, tmp_path):
    # The 262k-token vocabulary spans megabytes of header; cut in the middle of it.
    path = _truncated_copy(embedded_model_path, tmp_path / "stub.gguf", 64 * 1024)
    assert "stub.gguf is truncated or damaged" in _error(path)


def test_a_later_shard_names_the_first(split_moe):
    message = _error(split_moe[1])
    assert "shard 2 of 4" in message
    assert "pass the first shard, tiny-00001-of-00004.gguf" in message


def test_a_missing_shard_is_named(split_moe, tmp_path):
    for p in split_moe:
        if p.name != "tiny-00003-of-00004.gguf":
            shutil.copy(p, tmp_path / p.name)
    message = _error(tmp_path / split_moe[0].name)
    assert "missing" in message and "tiny-00003-of-00004.gguf" in message


def test_a_renamed_first_shard_is_refused(split_moe, tmp_path):
    renamed = tmp_path / "model.gguf"
    shutil.copy(split_moe[0], renamed)
    assert "4-shard split model" in _error(renamed)
