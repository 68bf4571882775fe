"""The model picker (metadata and estimate before loading) and cancellable loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.full_disk import fill_the_disk
from workbench.atomic_write import OutputFileError
from workbench.moe.layout import read_model_facts
from workbench.moe.memory_estimate import estimate_memory
from workbench.ui.models.qt_model_picker import BUNDLED_BASE, QtModelPicker
from workbench.ui.models.recent import add_recent, load_recent

WAIT = 60_000


def test_estimate_grows_with_the_context(embedded_model_path: Path):
    facts = read_model_facts(embedded_model_path)
    small, big = estimate_memory(facts, 512, 1000.0), estimate_memory(facts, 4096, 1000.0)
    assert big.kv_max_mib == 8 * small.kv_max_mib > 0
    assert small.weights_mib == facts.tensor_bytes / 2**20
    assert small.fits and not estimate_memory(facts, 4096, 10.0).fits
    assert "at most" in "\n".join(small.lines())


def test_recent_models_are_newest_first_without_duplicates(data_dir: Path):
    add_recent("/m/a.gguf")
    add_recent("/m/b.gguf")
    add_recent("/m/a.gguf")
    assert load_recent() == ["/m/a.gguf", "/m/b.gguf"]


def test_a_full_disk_leaves_the_recent_list_as_it_was(data_dir: Path, monkeypatch):
    """Issue 12, case 3: a failed write left a 0-byte `recent_models.tmp` beside the list.
    Now the list is written whole or not at all, and no temporary is left."""
    add_recent("/m/a.gguf")
    before = sorted(p.name for p in data_dir.iterdir())
    fill_the_disk(monkeypatch, budget=0)
    with pytest.raises(OutputFileError, match="the disk is full"):
        add_recent("/m/b.gguf")
    assert sorted(p.name for p in data_dir.iterdir()) == before == ["recent_models.json"]
    assert load_recent() == ["/m/a.gguf"]


def test_the_window_says_when_the_recent_list_cannot_be_saved(qtbot, make_window, monkeypatch):
    """The model is open all the same; the notice says the list was not updated, and why."""
    fill_the_disk(monkeypatch, budget=0)
    window = make_window()
    assert window.chat.model is not None
    qtbot.waitUntil(lambda: window.notice.kind == "error", timeout=WAIT)
    assert "recent models was not updated" in window.notice.text
    assert "the disk is full" in window.notice.text


def test_picker_shows_metadata_and_estimate_before_loading(qtbot, make_window, tmp_path, data_dir):
    window = make_window(load=False)
    bad = tmp_path / "half.gguf"
    bad.write_bytes(b"")
    picker = QtModelPicker(window.config, window)
    task = window.tasks.spawn(picker.choose())
    qtbot.waitUntil(picker.open_button.isEnabled, timeout=WAIT)
    # The default, listed first, is the chat model.
    assert "SmolLM2-135M-Instruct" in picker.details.toPlainText()
    assert "KV cache at this context: at most" in picker.estimate.text()
    before = picker.estimate.text()
    picker.n_ctx.setValue(picker.n_ctx.value() * 2)
    assert picker.estimate.text() != before

    picker.select(str(bad))
    qtbot.waitUntil(lambda: "empty" in picker.details.toPlainText(), timeout=WAIT)
    assert not picker.open_button.isEnabled()
    picker.select(BUNDLED_BASE)
    qtbot.waitUntil(lambda: "gemma3" in picker.details.toPlainText(), timeout=WAIT)
    qtbot.waitUntil(picker.open_button.isEnabled, timeout=WAIT)
    picker.n_ctx.setValue(1024)
    picker.open_button.click()
    qtbot.waitUntil(task.done, timeout=WAIT)
    config = task.result()
    assert config.n_ctx == 1024 and Path(config.model).name == "gemma-3-270m-q4_k_m.gguf"


def test_loading_shows_progress_and_can_be_cancelled(qtbot, make_window, model_config):
    window = make_window(load=False)
    seen: list[int] = []

    def cancel_at_first_progress(value: int) -> None:
        seen.append(value)
        if window.status.cancel_button.isVisible():
            window.status.cancel_button.click()

    window.status.load_bar.valueChanged.connect(cancel_at_first_progress)
    window.status.set_loading(None)
    task = window.tasks.spawn(window.load_model(model_config))
    qtbot.waitUntil(task.done, timeout=WAIT)
    assert task.result() is None and window.chat.model is None
    assert seen and window.status.state == "no model"
    assert window.notice.kind == "info" and "cancelled" in window.notice.text
    assert not window.status.load_bar.isVisible()
    window.status.load_bar.valueChanged.disconnect(cancel_at_first_progress)
    task = window.tasks.spawn(window.load_model(model_config))
    qtbot.waitUntil(task.done, timeout=WAIT)
    assert window.chat.model is not None and window.status.state == "idle"
    qtbot.waitUntil(lambda: load_recent() == [model_config.model], timeout=WAIT)
