"""A turn's settings are derived from the config tree (issue 37): nothing declared twice."""

from __future__ import annotations

import dataclasses

import pytest

from workbench.config import SETTINGS, Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.turn_settings import SESSION_WIDE, TurnSettings


def test_the_fields_are_the_request_scope_settings_of_a_turn():
    fields = {f.name: f.default for f in dataclasses.fields(TurnSettings)}
    wanted = {s.name: s.default for s in SETTINGS
              if s.scope == "request" and s.name not in SESSION_WIDE}
    assert fields == wanted
    assert not {"model", "n_ctx", "kv_pool_mb", "auto_title"} & set(fields)


def test_a_value_taken_from_a_config_and_changed_without_touching_it():
    config = Config(temp=0.7, seed=3, n_ctx=2048, system_prompt="Be brief.")
    turn = TurnSettings.of(config)
    assert (turn.temp, turn.seed, turn.system_prompt) == (0.7, 3, "Be brief.")
    hotter = turn.replace(temp=1.5)
    assert (turn.temp, hotter.temp) == (0.7, 1.5) and hotter.sampling != turn.sampling
    assert turn.replace(n_predict=9).sampling == turn.sampling  # not a sampling setting
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.temp = 0.0  # type: ignore[misc]
    assert turn.on(config) == config
    assert [p.setting for p in turn.replace(temp=-1).problems(config)] == ["temp"]


def test_a_request_resolves_its_overrides_over_its_settings():
    base = TurnSettings.of(Config(n_predict=64, think=True))
    assert GenerateRequest("hi").turn_settings(base) == base
    own = GenerateRequest("hi", settings=base.replace(temp=0.5), n_predict=8, think=False)
    got = own.turn_settings(TurnSettings())
    assert (got.temp, got.n_predict, got.think) == (0.5, 8, False)
