"""Presets: named settings, saved, loaded, renamed, deleted, listed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.presets import Preset
from workbench.store import NotFound, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "w.db") as s:
        yield s


def test_save_load_overwrite(store: Store):
    settings = {"temperature": 0.7, "top_p": 0.95, "stop": ["</s>"], "seed": -1}
    saved = store.save_preset("Precise", settings)
    assert saved.name == "Precise" and saved.settings == settings
    assert saved.updated_at is not None and saved.updated_at > 0  # store metadata, kept
    loaded = store.load_preset("Precise")
    assert loaded == Preset("Precise", settings) and loaded.updated_at == saved.updated_at
    store.save_preset("Precise", {"temperature": 0.2})
    assert store.load_preset("Precise").settings == {"temperature": 0.2}
    with pytest.raises(NotFound):
        store.load_preset("precise")  # names are exact
    with pytest.raises(ValueError):
        store.save_preset("  ", {})


def test_list_is_by_name_ignoring_case(store: Store):
    for name in ("beta", "Alpha", "gamma"):
        store.save_preset(name, {"n": name})
    presets = store.list_presets()
    assert [p.name for p in presets] == ["Alpha", "beta", "gamma"]
    assert presets[0].settings == {"n": "Alpha"}


def test_rename_and_delete(store: Store):
    store.save_preset("a", {"x": 1})
    store.save_preset("b", {"x": 2})
    with pytest.raises(ValueError):
        store.rename_preset("a", "b")  # would overwrite b
    store.rename_preset("a", "c")
    assert [p.name for p in store.list_presets()] == ["b", "c"]
    assert store.load_preset("c").settings == {"x": 1}
    with pytest.raises(NotFound):
        store.rename_preset("a", "d")
    store.delete_preset("b")
    assert [p.name for p in store.list_presets()] == ["c"]
    with pytest.raises(NotFound):
        store.delete_preset("b")


def test_presets_persist(tmp_path: Path):
    with Store.open(tmp_path / "w.db") as store:
        store.save_preset("kept", {"top_k": 40})
    with Store.open(tmp_path / "w.db") as store:
        assert store.load_preset("kept").settings == {"top_k": 40}
