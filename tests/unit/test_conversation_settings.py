"""A conversation's own settings: kept by the store (schema step 3), merged over the global
settings, and only the system prompt and sampling settings."""

from __future__ import annotations

import pytest

from workbench.config import Config
from workbench.store import Store
from workbench.store.records import NotFound
from workbench.ui.chat.conversation_settings import KEYS, config_for, settings_of, summary


def test_the_store_keeps_a_conversations_settings_without_reordering_the_list(tmp_path):
    with Store.open(tmp_path / "w.db") as store:
        a = store.create_conversation("a", created_at=1.0)
        b = store.create_conversation("b", created_at=2.0)
        assert store.conversation_settings(a.id) == {}  # follows the global settings
        store.set_conversation_settings(a.id, {"system_prompt": "Be brief.", "temp": 0.5})
        assert store.conversation_settings(a.id) == {"system_prompt": "Be brief.", "temp": 0.5}
        assert [c.id for c in store.list_conversations()] == [b.id, a.id]
        with pytest.raises(NotFound):
            store.set_conversation_settings(999, {})
    with Store.open(tmp_path / "w.db") as store:  # and after a restart
        assert store.conversation_settings(a.id)["system_prompt"] == "Be brief."


def test_a_conversations_settings_are_declared_in_the_config_tree():
    from workbench.config import CONVERSATION_SETTINGS, ConfigError, _check_conversation_settings

    assert frozenset(CONVERSATION_SETTINGS) == KEYS
    with pytest.raises(ConfigError, match="n_ctx"):  # load-time: opening it would reload
        _check_conversation_settings(("system_prompt", "n_ctx"))
    with pytest.raises(ConfigError, match="no_such"):
        _check_conversation_settings(("no_such",))


def test_only_the_prompt_and_sampling_are_a_conversations():
    assert "system_prompt" in KEYS and {"temp", "top_p", "min_p", "repeat_penalty"} <= KEYS
    assert not KEYS & {"model", "n_ctx", "n_predict", "moe_stream", "kv_pool_mb"}
    base = Config(n_ctx=1024, temp=0.2)
    mine = config_for(base, {"temp": 0.9, "system_prompt": "Pirate.", "n_ctx": 64, "x": 1})
    assert (mine.temp, mine.system_prompt, mine.n_ctx) == (0.9, "Pirate.", 1024)
    assert settings_of(mine)["temp"] == 0.9 and set(settings_of(mine)) == KEYS


def test_stored_values_that_do_not_validate_leave_the_global_settings():
    base = Config(temp=0.2)
    assert config_for(base, {"temp": "hot"}) == base
    assert config_for(base, {"top_p": 7.0, "temp": 0.5}) == base
    assert config_for(base, {}) is base


def test_the_header_line_says_prompt_and_sampler():
    assert summary(Config()) == "No system prompt · greedy"
    line = summary(Config(system_prompt="You are a helpful pirate. " * 5, temp=0.7,
                          repeat_penalty=1.2))
    assert line.startswith("System prompt: You are a helpful pirate.") and "…" in line
    assert "temperature 0.7" in line and "repetition penalty 1.2" in line
