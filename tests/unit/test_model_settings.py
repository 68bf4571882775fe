"""The load-time settings a model opens with (issue 29, item 2): its own from the last time,
else defaults fitted to it and to the memory available; never another model's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from workbench.config import Config, validate
from workbench.engine import model_settings as ms
from workbench.engine.opening import Opening, decide
from workbench.moe.layout import read_model_facts
from workbench.moe.synth import write_synthetic_moe

GIB = 1024


def opening_settings(path: Path, facts, window: Config, remembered,
                     available_mib: float = -1.0) -> Opening:
    """What the picker asks for: `path` under the window's settings in force."""
    return decide(str(path), window=window, remembered=remembered, facts=facts,
                  available_mib=available_mib)


@pytest.fixture(scope="module")
def moe_facts(tmp_path_factory):
    path = write_synthetic_moe(tmp_path_factory.mktemp("m") / "moe.gguf", size="tiny")[0]
    return read_model_facts(path)


def test_another_models_load_time_settings_are_not_inherited(moe_facts):
    # The window runs a model with a 256 context, streaming and dropping chosen for it.
    tuned = Config().replace(model="/m/other.gguf", n_ctx=256, moe_stream=True, cache_mb=64,
                             drop_cold_frac=0.75, temp=0.7, n_predict=100)
    assert not validate(tuned)
    opening = opening_settings(moe_facts.path, moe_facts, tuned, {}, 64 * GIB)
    got = opening.chosen()
    assert not opening.remembered and got.model == str(moe_facts.path)
    assert (got.moe_stream, got.cache_mb, got.drop_cold_frac) == (False, 0, 0.0)
    assert got.n_ctx == moe_facts.n_ctx_train == 256  # fitted to its trained context
    assert (got.temp, got.n_predict) == (0.7, 100)  # per-request settings stay the window's
    assert "defaults for this model (fitted to its trained context)" in opening.note()


def test_a_model_opens_with_its_own_remembered_settings(moe_facts, tmp_path: Path):
    own = Config().replace(model=str(moe_facts.path), n_ctx=128, moe_stream=True, cache_mb=64,
                           drop_cold_frac=0.5, n_predict=64)
    remembered = ms.with_model({}, own)
    ms.save_remembered(tmp_path, remembered)
    assert ms.load_remembered(tmp_path) == remembered
    base = Config().replace(n_predict=64, temp=0.3)
    got = opening_settings(moe_facts.path, moe_facts, base, remembered).chosen()
    assert (got.n_ctx, got.moe_stream, got.cache_mb, got.drop_cold_frac) == (128, True, 64, 0.5)
    assert got.temp == 0.3
    note = opening_settings(moe_facts.path, moe_facts, base, remembered).note()
    assert note.startswith("Opens with its own settings from the last time: context 128")
    assert "expert streaming on (cache 64 MiB)" in note and "dropping 50 %" not in note


def test_a_remembered_entry_that_no_longer_validates_gives_the_defaults(moe_facts):
    remembered = {str(moe_facts.path): {"n_ctx": -5, "moe_stream": "yes"}}
    opening = opening_settings(moe_facts.path, moe_facts, Config(), remembered)
    assert not opening.remembered and opening.chosen().n_ctx == 256


def test_the_defaults_fit_the_machines_memory(moe_facts):
    big = replace(moe_facts, n_ctx_train=131072, tensor_bytes=40 * GIB * 2**20,
                  expert_bytes=36 * GIB * 2**20, n_layer=48, n_embd=4096)
    opening = opening_settings(big.path, big, Config(), {}, available_mib=16 * GIB)
    got = opening.chosen()
    assert got.moe_stream and got.cache_auto  # 40 GiB of weights in 16 GiB: stream experts
    # The offer is what the settings panel makes of streaming with a cache (issue 37): the
    # window's default dropping comes with it, as when the user ticks the same boxes.
    assert got.drop_cold_frac == 0.75
    assert got.n_ctx == 4096  # the default context: its KV cache fits
    assert not validate(got)
    assert "fitted to this machine's memory" in opening.note()
    roomy = opening_settings(big.path, big, Config(), {}, available_mib=512 * GIB).chosen()
    assert not roomy.moe_stream and roomy.n_ctx == 4096
    # 1 GiB of weights, a 3 GiB KV cache at 4096 tokens, 4 GiB available: half the context.
    wide = replace(big, tensor_bytes=GIB * 2**20, expert_bytes=0)
    small = opening_settings(wide.path, wide, Config(), {}, available_mib=4 * GIB)
    assert small.chosen().n_ctx == 2048 and not small.chosen().moe_stream
    assert "fitted to this machine's memory" in small.note()


def test_a_reply_longer_than_the_context_is_shortened_and_said(moe_facts):
    opening = opening_settings(moe_facts.path, moe_facts, Config().replace(n_predict=512), {})
    assert opening.chosen().n_predict == 128 and not validate(opening.chosen())
    assert "Tokens to generate lowered from 512 to 128" in opening.note()


def test_a_damaged_file_remembers_nothing(tmp_path: Path):
    ms.settings_file(tmp_path).write_text("{not json", encoding="utf-8")
    assert ms.load_remembered(tmp_path) == {}
    ms.settings_file(tmp_path).write_text("[1, 2]", encoding="utf-8")
    assert ms.load_remembered(tmp_path) == {}
