"""The model picker offers streaming (with the cache `advise` plans) for a model that will not
fit in memory, and the config it returns carries it; a model that fits gets no offer."""

from __future__ import annotations

from tests.ui.user_actions import WAIT


def _pick(qtbot, window, model, take: bool | None):
    from workbench.ui.models.qt_model_picker import QtModelPicker

    picker = QtModelPicker(window.config, window, preselect=str(model))
    task = window.tasks.spawn(picker.choose())
    qtbot.waitUntil(picker.open_button.isEnabled, timeout=WAIT)
    offer = picker.fit_offer
    shown = (offer.isVisibleTo(picker), offer.use.isVisibleTo(picker), offer.use.text(),
             offer.note.text())
    if take is not None:
        offer.use.setChecked(take)
    picker.open_button.click()
    qtbot.waitUntil(task.done, timeout=WAIT)
    return shown, task.result()


def test_a_model_that_does_not_fit_is_offered_streaming(qtbot, make_window, tiny_moe_path,
                                                       monkeypatch):
    from workbench.bench.advise import RESERVE_MIB, layout_of, plan
    from workbench.moe.layout import read_model_facts
    from workbench.ui.models import qt_model_picker

    # What the picker reads as available: enough for the dense part with its KV cache and the
    # reserve, a MiB short of the whole model (tiny: 7 MiB of weights, 6 of them experts).
    window = make_window(load=False)
    layout = layout_of(read_model_facts(tiny_moe_path))
    kv = picker_kv(window.config.replace(model=str(tiny_moe_path)))
    available = layout.weights_mib + kv + RESERVE_MIB - 1
    monkeypatch.setattr(qt_model_picker, "available_memory_mib", lambda: available)
    (visible, offered, text, note), config = _pick(qtbot, window, tiny_moe_path, take=None)
    assert visible and offered and "Stream its experts from disk" in text
    assert "stream its experts" in note
    expected = plan(layout, _machine(available), kv)
    assert expected.verdict == "stream"
    assert config.moe_stream is True and config.cache_mb == expected.cache_mb > 0
    assert not config.cache_auto
    # Declined: the config is as before.
    _, declined = _pick(qtbot, window, tiny_moe_path, take=False)
    assert declined.moe_stream is False and declined.cache_mb == window.config.cache_mb


def test_a_model_that_fits_gets_no_offer(qtbot, make_window, tiny_moe_path, monkeypatch):
    from workbench.ui.models import qt_model_picker

    monkeypatch.setattr(qt_model_picker, "available_memory_mib", lambda: 16_000.0)
    window = make_window(load=False)
    (visible, _, _, _), config = _pick(qtbot, window, tiny_moe_path, take=None)
    assert not visible and config.moe_stream is False


def test_a_model_that_cannot_fit_says_so(qtbot, make_window, embedded_model_path, monkeypatch):
    from workbench.ui.models import qt_model_picker

    monkeypatch.setattr(qt_model_picker, "available_memory_mib", lambda: 600.0)
    window = make_window(load=False)
    (visible, offered, _, note), config = _pick(qtbot, window, embedded_model_path, take=None)
    assert visible and not offered and "not a Mixture-of-Experts model" in note
    assert config.moe_stream is False


def _machine(available: float):
    from workbench.bench.advise import Machine, this_machine

    m = this_machine()
    return Machine(available, m.total_mib, m.cores)


def picker_kv(config) -> float:
    from workbench.moe.layout import read_model_facts
    from workbench.moe.memory_estimate import estimate_memory

    return estimate_memory(read_model_facts(config.model), config.n_ctx).kv_max_mib
