"""The one Preset: settings laid over a base config, and the two ways to write one by hand."""

from __future__ import annotations

import json

import pytest

from workbench.config import Config, ConfigError
from workbench.presets import Preset, PresetError, load_preset_file, parse_preset


def test_inline_presets_are_typed_by_the_settings_declarations():
    preset = parse_preset("lean=n_threads=2, temp=0.5 ,think=off,system_prompt=Be brief")
    assert preset == Preset("lean", {"n_threads": 2, "temp": 0.5, "think": False,
                                     "system_prompt": "Be brief"})
    assert parse_preset("base") == Preset("base", {})
    assert parse_preset("old=chatml=1").settings == {"chat_template": True}  # renamed key


@pytest.mark.parametrize(("text", "complaint"), [
    ("x=n_thread=2", "did you mean 'n_threads'"),
    ("x=n_threads=two", "expected a whole number"),
    ("x=think=maybe", "expected on or off"),
    ("x=n_threads", "not key=value"),
])
def test_bad_inline_presets_say_what_to_fix(text, complaint):
    with pytest.raises(PresetError, match=complaint):
        parse_preset(text)


def test_preset_files_map_old_names_and_refuse_unknown_ones(tmp_path):
    path = tmp_path / "presets.json"
    path.write_text(json.dumps({"one": {"n_threads": 1}, "old": {"chatml": False}}))
    assert load_preset_file(path) == [Preset("one", {"n_threads": 1}),
                                      Preset("old", {"chat_template": False})]
    path.write_text(json.dumps({"typo": {"n_thread": 1}}))
    with pytest.raises(PresetError, match="preset 'typo': unknown setting 'n_thread'"):
        load_preset_file(path)
    path.write_text("[1, 2]")
    with pytest.raises(PresetError, match="expected"):
        load_preset_file(path)


def test_a_preset_overrides_its_base_and_is_validated():
    base = Config(n_predict=64, temp=0.0)
    assert Preset("t", {"n_threads": 1}).config(base) == base.replace(n_threads=1)
    assert Preset("old", {"chatml": False}).config(base).chat_template is False  # renamed key
    with pytest.raises(PresetError, match="preset 'zero': n_threads is 0"):
        Preset("zero", {"n_threads": 0}).config(base)
    with pytest.raises(PresetError, match="preset 'typo': unknown setting"):
        Preset("typo", {"n_thread": 2}).config(base)


def test_apply_leaves_validation_to_the_caller():
    # The settings panel loads a preset it then shows as pending edits, problems and all.
    assert Preset("zero", {"n_threads": 0}).apply(Config()).n_threads == 0
    with pytest.raises(ConfigError, match="unknown setting"):
        Preset("typo", {"n_thread": 2}).apply(Config())


def test_when_the_store_saved_a_preset_is_not_part_of_what_it_is():
    assert Preset("a", {"temp": 0.5}, updated_at=1.0) == Preset("a", {"temp": 0.5})
