"""Writing a synthetic model: the plan's tensors streamed one slice at a time, the common
metadata with the architecture's own in its places, the byte vocabulary."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, TokenType
from gguf.constants import GGMLQuantizationType

from workbench.atomic_write import StagedFiles
from workbench.moe.synth.arch import ARCHES, ARCHITECTURES
from workbench.moe.synth.plans import _Plan
from workbench.moe.synth.spec import (
    _FILE_TYPES,
    BOS_ID,
    CHATML_TEMPLATE,
    EOS_ID,
    UNK_ID,
    VOCAB_SIZE,
    SynthSpec,
    _nbytes,
)
from workbench.moe.synth.validation import _validate
from workbench.moe.synth.values import _tensor_chunks


def write_spec(path: str | Path, spec: SynthSpec, seed: int = 0) -> list[Path]:
    """Write the model `spec` describes. Tensors are generated and written one slice at a time,
    so a multi-GiB bench model needs only one expert's worth of memory.

    The files appear whole or not at all: they are written in a hidden directory beside `path`
    and renamed into place at the end (atomic_write.StagedFiles). `path`'s directory must exist;
    a full disk or any other write failure is an OutputFileError and leaves nothing behind.
    """
    _validate(spec)
    path = Path(path)
    plans = _tensor_plans(spec)
    with StagedFiles(path) as stage:
        writer = GGUFWriter(
            stage.target,
            spec.arch,
            split_max_tensors=spec.split_max_tensors,
            # Metadata alone in shard 1, like the upstream's split models: a reader must then
            # follow the shards to find any tensor at all.
            small_first_shard=spec.split_max_tensors > 0,
        )
        _add_metadata(writer, spec)
        for plan in plans:
            writer.add_tensor_info(
                plan.name,
                plan.shape,
                np.dtype(np.float32),
                _nbytes(plan.shape, plan.ggml_type),
                raw_dtype=GGMLQuantizationType[plan.ggml_type],
            )
        files = writer.format_shard_names(stage.target)
        try:
            _write_files(writer, {plan.name: plan for plan in plans}, spec, seed)
            writer.close()  # the last flush: a full disk can show here too
        except BaseException:
            _close_quietly(writer)
            raise
        return stage.commit(files)


def _write_files(writer: GGUFWriter, by_name: dict[str, _Plan], spec: SynthSpec,
                 seed: int) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    assert writer.fout is not None
    # The writer keeps each shard's tensor infos in file order; stream the data ourselves so
    # no tensor has to be held whole in memory.
    for fout, shard in zip(writer.fout, writer.tensors, strict=True):
        writer.write_padding(fout, fout.tell())
        for name, info in shard.items():
            written = 0
            for chunk in _tensor_chunks(by_name[name], spec, seed):
                # fout.write, not chunk.tofile: tofile writes below the file object and reports
                # a full disk as "N requested and M written", without the errno that lets the
                # message say what happened. A large write goes straight through, uncopied.
                fout.write(np.ascontiguousarray(chunk).data)
                written += chunk.nbytes
            if written != info.nbytes:
                raise AssertionError(f"{name}: wrote {written} bytes, planned {info.nbytes}")
            writer.write_padding(fout, written)


def _close_quietly(writer: GGUFWriter) -> None:
    """Close every shard even if one's final flush fails (the files are being thrown away);
    GGUFWriter.close() stops at the first error and would leave the others open."""
    for fout in writer.fout or ():
        with contextlib.suppress(OSError):
            fout.close()
    writer.fout = None


def _tensor_plans(spec: SynthSpec) -> list[_Plan]:
    arch = ARCHITECTURES.get(spec.arch)
    if arch is None:
        raise ValueError(f"unknown arch {spec.arch!r}; choose one of {', '.join(ARCHES)}")
    return arch.plans(spec)


def _add_metadata(w: GGUFWriter, spec: SynthSpec) -> None:
    w.add_name(spec.name)
    w.add_file_type(int(_FILE_TYPES[spec.expert_type]))
    if spec.expert_type.startswith("Q") or spec.dense_type.startswith("Q"):
        w.add_quantization_version(2)
    w.add_context_length(spec.n_ctx_train)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    arch = ARCHITECTURES[spec.arch]
    arch.head_metadata(w, spec)
    w.add_head_count(spec.n_head)
    arch.attention_metadata(w, spec)
    w.add_layer_norm_rms_eps(spec.rms_eps)
    w.add_rope_freq_base(spec.rope_base)
    w.add_expert_count(spec.n_expert)
    w.add_expert_used_count(spec.n_expert_used)
    w.add_expert_feed_forward_length(spec.n_ff_exp)
    arch.tail_metadata(w, spec)
    _add_vocab(w)


def _add_vocab(w: GGUFWriter) -> None:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * VOCAB_SIZE)
    w.add_token_types([int(t) for t in types])
    w.add_unk_token_id(UNK_ID)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    # No leading "▁": prompts and outputs are plain bytes, and "hi" tokenizes to 'h', 'i'.
    w.add_add_space_prefix(False)
    w.add_chat_template(CHATML_TEMPLATE)
