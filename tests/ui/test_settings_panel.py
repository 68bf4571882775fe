"""The settings panel: generated from the config tree, gated, validated, signature-aware, and
presets through a real Store."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from workbench.config import BY_NAME, GROUPS, SETTINGS, Config, inactive_reason, validate
from workbench.ui.settings.evaluate import REOPEN_TEXT
from workbench.ui.settings.qt_bool_editor import QtBoolEditor
from workbench.ui.settings.qt_choice_editor import QtChoiceEditor
from workbench.ui.settings.qt_number_editor import QtNumberEditor
from workbench.ui.settings.qt_setting_row import RELOAD_NOTE
from workbench.ui.settings.qt_settings_panel import QtSettingsPanel
from workbench.ui.settings.qt_text_editor import QtTextEditor

EDITOR_FOR = {"bool": QtBoolEditor, "choice": QtChoiceEditor, "int": QtNumberEditor,
              "float": QtNumberEditor, "str": QtTextEditor}
STREAMING_KNOBS = ("cache_mb", "cache_auto", "io_threads", "o_direct", "dense_weights")


@pytest.fixture
def panel(qtbot) -> QtSettingsPanel:
    widget = QtSettingsPanel(Config())
    qtbot.addWidget(widget)
    return widget


def edit(panel: QtSettingsPanel, name: str, value: object) -> None:
    """Change a setting the way a user does: through its editor's own widget."""
    editor = panel.rows[name].editor
    if isinstance(editor, QtBoolEditor):
        editor.box.setChecked(bool(value))
    elif isinstance(editor, QtNumberEditor) and editor.combo is not None:
        editor.combo.setCurrentIndex(editor.combo.findData(value))
    elif isinstance(editor, QtNumberEditor):
        editor.spin.setValue(float(value))  # type: ignore[arg-type,union-attr]
    elif isinstance(editor, QtChoiceEditor):
        editor.combo.setCurrentText(str(value))
    else:
        editor.line.setText(str(value))


def shown(label) -> bool:
    return not label.isHidden()


def test_every_setting_gets_a_widget_of_its_type(panel):
    assert list(panel.rows) == [s.name for s in SETTINGS]
    for s in SETTINGS:
        row = panel.rows[s.name]
        assert type(row.editor) is EDITOR_FOR[s.type], s.name
        if s.numeric:  # rungs replace the spin box; they do not sit beside it
            assert (row.editor.spin is None) == bool(s.rungs), s.name
            assert (row.editor.combo is None) == (not s.rungs), s.name
        assert row.label.text() == s.label
        assert s.help in row.hint.text()
        assert (RELOAD_NOTE in row.hint.text()) == (s.scope == "load"), s.name
    assert list(panel.groups) == [g.name for g in GROUPS]
    # Units and special values are shown by the spin boxes themselves.
    assert panel.rows["n_ctx"].editor.spin.text() == "4096 tokens"
    assert panel.rows["temp"].editor.spin.text() == "greedy"
    assert panel.rows["seed"].editor.spin.text() == "random"
    assert panel.rows["dense_weights"].editor.combo.count() == 2
    assert panel.rows["model"].editor.browse is not None
    assert panel.rows["model"].editor.line.placeholderText() == "bundled model"


def test_sampling_knobs_are_disabled_under_greedy_and_say_why(panel):
    for name in ("top_k", "top_p", "seed"):
        row = panel.rows[name]
        assert not row.active
        assert row.reason.text() == inactive_reason(BY_NAME[name], Config())
        assert "temp > 0" in row.reason.text() and "greedy" in row.reason.text()
        assert shown(row.reason)
    edit(panel, "temp", 0.7)
    assert panel.pending.temp == 0.7
    for name in ("top_k", "top_p", "seed"):
        assert panel.rows[name].active
        assert not shown(panel.rows[name].reason)
    edit(panel, "temp", 0)
    assert not panel.rows["top_k"].active


def test_streaming_knobs_wait_for_moe_stream(panel):
    for name in STREAMING_KNOBS:
        assert not panel.rows[name].active, name
        assert "Only used when moe_stream is on" in panel.rows[name].reason.text(), name
    for name in ("cache_floor_mb", "cache_ceil_mb"):
        assert not panel.rows[name].active, name
        assert "cache_auto is on" in panel.rows[name].reason.text(), name
    edit(panel, "moe_stream", True)
    for name in STREAMING_KNOBS:
        assert panel.rows[name].active, name
    # The automatic-sizing knobs need one more switch.
    assert not panel.rows["cache_floor_mb"].active
    assert "cache_auto is on" in panel.rows["cache_floor_mb"].reason.text()
    edit(panel, "cache_auto", True)
    assert panel.rows["cache_floor_mb"].active and panel.rows["cache_ceil_mb"].active


def test_drop_cold_experts_offers_its_rungs_and_waits_for_the_cache(qtbot, panel):
    row = panel.rows["drop_cold_frac"]
    combo = row.editor.combo
    assert [combo.itemText(i) for i in range(combo.count())] == ["off", "50 %", "75 %", "100 %"]
    assert not row.active and "LRU cache" in row.reason.text()
    edit(panel, "moe_stream", True)
    assert not row.active  # streaming alone is not enough: without a cache it is a weight cut
    assert not panel.rows["drop_renorm"].active  # waits for dropping itself
    edit(panel, "cache_mb", 512)
    # The window's default follows upstream's app: 75 % once streaming has a cache (the CLI's
    # stays off), shown in the editor and said in the row's hint.
    assert row.active and not shown(row.reason)
    assert panel.pending.drop_cold_frac == 0.75 and combo.currentText() == "75 %"
    assert "75 % while expert streaming is on with the LRU cache" in row.hint.text()
    assert panel.rows["drop_renorm"].active
    assert shown(panel.reopen_label) and panel.apply_button.isEnabled()
    # The cache going off takes the default back to off, so nothing is left to fix.
    edit(panel, "cache_mb", 0)
    assert panel.pending.drop_cold_frac == 0.0 and combo.currentText() == "off"
    assert not row.active and not shown(row.problem) and panel.apply_button.isEnabled()
    # A value the user chose is kept when the cache goes: greyed out and ignored, with the
    # reason beside it, and no error blocks Apply (#29).
    edit(panel, "cache_mb", 512)
    edit(panel, "drop_cold_frac", 0.5)
    edit(panel, "cache_mb", 0)
    assert panel.pending.drop_cold_frac == 0.5
    assert not row.active and not shown(row.problem) and "Ignored" in row.reason.text()
    assert panel.apply_button.isEnabled()
    edit(panel, "cache_mb", 512)  # the kept value comes back with the cache
    assert row.active and row.editor.value() == 0.5
    edit(panel, "drop_cold_frac", 0.0)
    edit(panel, "cache_mb", 0)
    assert not row.active and not shown(row.problem) and panel.apply_button.isEnabled()
    # A value between rungs (from the CLI or a preset) is shown as itself, not rounded.
    row.set_value(0.6)
    assert combo.currentText() == "0.6" and row.editor.value() == 0.6


def test_streaming_off_while_dropping_greys_dropping_out_and_applies_without_it(qtbot, panel):
    """Issue #29: turning streaming off with dropping set must not block Apply with an error
    under a row screens away; dropping greys out (it needs the cache), is ignored, says why.
    A chosen value (50 %, not the window's 75 % default, which goes back to off with the cache:
    issue #23) is kept."""
    streaming = Config(moe_stream=True, cache_mb=512, drop_cold_frac=0.5, drop_prefill=True)
    panel.set_config(streaming)
    row = panel.rows["drop_cold_frac"]
    assert row.active
    edit(panel, "moe_stream", False)
    assert not row.active and shown(row.reason)
    assert "Ignored" in row.reason.text() and "expert streaming is on" in row.reason.text()
    assert row.editor.value() == 0.5  # kept where the user set it, greyed
    assert not any(shown(r.problem) for r in panel.rows.values())
    assert "problem" not in panel.status_label.text()
    assert not panel.rows["drop_prefill"].active  # it follows dropping, which is ignored
    assert panel.apply_button.isEnabled()
    with qtbot.waitSignal(panel.applied) as signal:
        panel.apply_button.click()
    config, reopen = signal.args
    assert reopen is True and not config.moe_stream
    assert config.drop_cold_frac == 0.0 and validate(config) == []  # ignored, not applied
    assert panel.current == config and panel.status_label.text() == "No changes"
    assert not row.active and row.editor.value() == 0.5


def test_impossible_combinations_show_inline_and_block_apply(qtbot, panel):
    edit(panel, "moe_stream", True)
    edit(panel, "cache_auto", True)
    assert panel.apply_button.isEnabled()
    edit(panel, "cache_mb", 512)
    expected = [p.message for p in validate(panel.pending)]
    assert len(expected) == 1 and "cache_mb=512 and cache_auto" in expected[0]
    row = panel.rows["cache_mb"]
    assert shown(row.problem) and row.problem.text() == expected[0]
    assert not panel.apply_button.isEnabled()
    assert "1 problem" in panel.status_label.text()
    with qtbot.assertNotEmitted(panel.applied):
        assert panel.apply() is False
    edit(panel, "cache_mb", 0)
    assert not shown(row.problem) and panel.apply_button.isEnabled()

    edit(panel, "n_predict", 4096)  # as many as the context holds: no room for the prompt
    problem = panel.rows["n_predict"].problem
    assert shown(problem) and "must be smaller than the context (4096)" in problem.text()
    assert not panel.apply_button.isEnabled()
    edit(panel, "n_ctx", 8192)  # fixed from the other side
    assert not shown(problem) and panel.apply_button.isEnabled()


def test_a_load_time_change_reopens_the_model(qtbot, panel):
    assert not shown(panel.reopen_label) and not panel.apply_button.isEnabled()
    edit(panel, "n_ctx", 8192)
    assert shown(panel.reopen_label) and panel.reopen_label.text() == REOPEN_TEXT
    with qtbot.waitSignal(panel.applied) as signal:
        panel.apply_button.click()
    config, reopen = signal.args
    assert reopen is True and config.n_ctx == 8192
    assert panel.current == config
    assert not shown(panel.reopen_label) and not panel.apply_button.isEnabled()


@pytest.mark.parametrize(("name", "value"), [("n_predict", 64), ("think", False),
                                             ("temp", 0.5), ("system_prompt", "Be brief")])
def test_a_per_request_change_does_not(qtbot, panel, name, value):
    edit(panel, name, value)
    assert not shown(panel.reopen_label)
    assert panel.evaluation.changed == (name,)
    with qtbot.waitSignal(panel.applied) as signal:
        panel.apply_button.click()
    config, reopen = signal.args
    assert reopen is False and getattr(config, name) == value


def test_values_are_shown_without_echo_and_revert(panel):
    # 0.333 shows as 0.33; had the spin box's rounding echoed back, pending would change.
    config = Config(temp=0.333, dense_weights="mmap", model="/m/x.gguf", top_k=7)
    panel.set_config(config)
    assert panel.pending == config and panel.evaluation.changed == ()
    assert panel.rows["dense_weights"].editor.combo.currentText() == "mmap"
    assert panel.rows["model"].editor.line.text() == "/m/x.gguf"
    assert panel.rows["top_k"].editor.spin.text() == "7 tokens"
    edit(panel, "top_k", 9)
    assert panel.revert_button.isEnabled()
    panel.revert_button.click()
    assert panel.pending == config
    assert panel.rows["top_k"].editor.spin.text() == "7 tokens"


def test_presets_round_trip_through_a_real_store(qtbot, run, tmp_path: Path):
    from workbench.ui.db_worker import AsyncStore
    from workbench.ui.settings.qt_settings_page import QtSettingsPage

    db = run(AsyncStore.open(tmp_path / "presets.db"))
    page = QtSettingsPage(Config(model="/models/a.gguf"), db.call)
    qtbot.addWidget(page)
    box, panel = page.presets, page.panel
    try:
        run(page.start())
        assert box.names() == []
        edit(panel, "temp", 0.7)
        edit(panel, "n_threads", 3)
        changes = [box.changes.item(i).text() for i in range(box.changes.count())]
        assert "Temperature: 0.7" in changes and "Compute threads: 3 threads" in changes
        assert "Model file: \"/models/a.gguf\"" in changes

        box.name.setText("warm")
        box.save_button.click()
        run(page.tasks.wait_idle())
        assert box.names() == ["warm"]
        stored = run(db.call(lambda s: s.load_preset("warm")))
        assert stored.settings == {"model": "/models/a.gguf", "n_threads": 3, "temp": 0.7}

        panel.revert()
        assert panel.pending.temp == 0.0
        box.select("warm")
        box.load_button.click()
        run(page.tasks.wait_idle())
        assert panel.pending.temp == 0.7 and panel.pending.n_threads == 3
        assert panel.current.temp == 0.0 and shown(panel.reopen_label)  # n_threads: load time

        box.list.item(0).setText("warm start")  # what an in-place edit does
        run(page.tasks.wait_idle())
        assert box.names() == ["warm start"]
        assert [p.name for p in run(db.call(lambda s: s.list_presets()))] == ["warm start"]

        with qtbot.waitSignal(page.rerun_with) as signal:
            box.rerun_button.click()
            run(page.tasks.wait_idle())
        assert signal.args[0].temp == 0.7

        box.delete_button.click()
        run(page.tasks.wait_idle())
        assert box.names() == [] and run(db.call(lambda s: s.list_presets())) == []
        assert shown(box.undo_button)
        box.undo_button.click()
        run(page.tasks.wait_idle())
        assert box.names() == ["warm start"]
        assert run(db.call(lambda s: s.load_preset("warm start"))).settings["temp"] == 0.7
    finally:
        run(db.close())


def test_a_preset_without_a_model_keeps_the_open_one():
    from workbench.presets import Preset
    from workbench.ui.settings.preset_store import config_from_preset

    current = Config(model="/models/open.gguf", n_ctx=8192)
    loaded = config_from_preset(Preset("p", {"temp": 0.5}), current)
    assert loaded == Config(model="/models/open.gguf", temp=0.5)  # n_ctx back to its default
    assert config_from_preset(Preset("p", {"model": "/b.gguf"}), current).model == "/b.gguf"
    assert config_from_preset(Preset("p", {"model_path": "/c.gguf"}), current).model == "/c.gguf"


def test_the_label_disables_with_its_editor(panel):
    row = panel.rows["top_k"]
    assert not row.label.isEnabled()
    assert row.label.toolTip().startswith(BY_NAME["top_k"].help)
    assert Qt.FocusPolicy.StrongFocus == panel.rows["n_ctx"].editor.spin.focusPolicy()
