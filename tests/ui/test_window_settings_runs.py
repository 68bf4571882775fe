"""The settings and runs docks inside the window, on the real engine and the embedded model:
per-request settings reach the open session without a reload, load-time ones reopen it, a
finished turn shows up in the runs list, and re-running a turn with a preset makes a sibling
answer while both runs are kept."""

from __future__ import annotations

import threading
from typing import Any

from PySide6.QtGui import QAction

from tests.ui.user_actions import WAIT, send
from workbench.config import SETTINGS
from workbench.store import Store, default_path


def on_engine(run, window, fn) -> Any:
    """fn(session) on the engine thread, where the bridge runs everything."""
    return run(window.bridge._call(lambda: fn(window.bridge._session)))


def menu_action(window, menu: str, text: str) -> QAction:
    for top in window.menuBar().actions():
        if top.text().replace("&", "") == menu:
            for action in top.menu().actions():
                if action.text().replace("&", "") == text:
                    return action
    raise AssertionError(f"no {menu} > {text} in the menus")


def in_front(dock) -> bool:
    """A dock behind another tab stays "visible" to Qt, only moved out of sight."""
    return not dock.visibleRegion().isEmpty()


def listed_runs(window) -> set[int]:
    return {e.run_id for e in window.runs_page.entries.values() if e.run_id is not None}


def test_the_docks_hold_every_setting_and_the_runs_and_the_menus_reach_them(qtbot, run,
                                                                            make_window):
    window = make_window(load=False)
    page = window.settings_page
    run(page.tasks.wait_idle())
    run(window.runs_page.tasks.wait_idle())
    assert window.settings_dock.widget() is page
    assert window.runs_dock.widget() is window.runs_page
    assert list(page.panel.rows) == [s.name for s in SETTINGS]
    assert set(window.tabifiedDockWidgets(window.telemetry_dock)) == {
        window.expert_dock, window.cache_dock, window.settings_dock, window.runs_dock}
    qtbot.waitUntil(lambda: in_front(window.telemetry_dock), timeout=WAIT)
    assert not in_front(window.settings_dock) and not in_front(window.runs_dock)

    window.settings_dock.close()
    assert not window.settings_dock.isVisible()
    menu_action(window, "View", "Settings").trigger()
    qtbot.waitUntil(lambda: in_front(window.settings_dock), timeout=WAIT)
    assert window.settings_dock.isVisible() and not in_front(window.telemetry_dock)

    menu_action(window, "Tools", "Bench matrix…").trigger()
    qtbot.waitUntil(lambda: window.runs_page.matrix_dialog is not None
                    and window.runs_page.matrix_dialog.isVisible(), timeout=WAIT)
    assert in_front(window.runs_dock)
    window.runs_page.matrix_dialog.reject()


def test_a_per_request_setting_applies_without_reopening_and_the_run_is_listed(qtbot, run,
                                                                               make_window):
    window = make_window()
    page = window.settings_page
    session = window.bridge._live
    # A load shows the model's settings on both pages.
    assert page.panel.current == window.config == window.chat.model.config
    assert window.runs_page.config == window.config and window.config.n_predict == 16

    page.panel.rows["n_predict"].editor.spin.setValue(5)
    assert page.panel.evaluation.changed == ("n_predict",)
    assert not page.panel.evaluation.reopen
    page.panel.apply_button.click()
    run(window.tasks.wait_idle())
    assert window.notice.kind != "error"
    assert window.bridge._live is session  # the same session: nothing was reopened
    # The session keeps its opening settings; each answer's request carries the 5.
    assert on_engine(run, window, lambda s: s.config.n_predict) == 16
    assert window.config.n_predict == 5 and window.chat.config.n_predict == 5
    assert page.panel.current.n_predict == 5 and window.runs_page.config.n_predict == 5

    send(qtbot, window, "Say hello.")  # greedy: 16 tokens, no early end
    answer = window.chat_view.messages[-1]
    assert answer.shown.status == "complete"
    run_id = answer.shown.stats.run_id
    qtbot.waitUntil(lambda: run_id in listed_runs(window), timeout=WAIT)
    with Store.open(default_path(), recover=False) as store:
        assert len(store.token_rows(run_id)) == 5
        assert store.get_run(run_id).settings["n_predict"] == 5  # recorded as it ran


def test_a_load_time_setting_reopens_the_model(qtbot, run, make_window):
    window = make_window()
    page = window.settings_page
    old = window.bridge._live
    page.panel.rows["n_ctx"].editor.spin.setValue(1024)
    assert page.panel.evaluation.reopen and not page.panel.reopen_label.isHidden()
    # Hold the engine thread, so the reload waits in plain view of the status bar.
    gate = threading.Event()
    held = window.tasks.spawn(window.bridge._call(lambda: gate.wait(WAIT / 1000)))
    page.panel.apply_button.click()
    qtbot.waitUntil(lambda: "reopening the model" in window.status.model_label.text(),
                    timeout=WAIT)
    assert window.status.state == "loading" and window.chat.model is None
    gate.set()
    run(window.tasks.wait_idle())
    assert held.result() is True
    assert window.bridge._live is not None and window.bridge._live is not old  # a new load
    assert window.chat.model.n_ctx == 1024 and window.composer.gauge.n_ctx == 1024
    assert on_engine(run, window, lambda s: s.n_ctx) == 1024
    assert window.config.n_ctx == 1024 and page.panel.current.n_ctx == 1024
    assert window.runs_page.config.n_ctx == 1024
    assert "reopening" not in window.status.model_label.text()
    send(qtbot, window, "Hello")
    assert window.chat_view.messages[-1].shown.status == "complete"


def test_a_failed_reopen_puts_the_settings_in_force_back(qtbot, run, make_window, tmp_path):
    window = make_window(load=False)
    before = window.config
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 16)
    page = window.settings_page
    page.panel.rows["model"].editor.line.setText(str(bad))
    assert page.panel.evaluation.reopen
    page.panel.apply_button.click()
    run(window.tasks.wait_idle())
    assert window.notice.kind == "error" and "broken.gguf" in window.notice.text
    assert window.config == before and page.panel.current == before
    assert page.panel.rows["model"].editor.line.text() == before.model


def test_rerun_with_a_preset_makes_a_sibling_and_keeps_both_runs(qtbot, run, make_window):
    window = make_window()
    send(qtbot, window, "Say hello.")
    first_id = window.chat_view.messages[-1].shown.id
    first_run = window.chat_view.messages[-1].shown.stats.run_id
    session = window.bridge._live
    page = window.settings_page
    # Save preset "B" (4 tokens an answer) as a user does, then drop the edit again.
    page.panel.rows["n_predict"].editor.spin.setValue(4)
    page.presets.name.setText("B")
    page.presets.save_button.click()
    run(page.tasks.wait_idle())
    assert "B" in page.presets.names()
    page.panel.revert_button.click()
    assert page.panel.pending.n_predict == 16 == window.config.n_predict

    page.presets.select("B")
    done = window.chat.turns_done
    page.presets.rerun_button.click()
    qtbot.waitUntil(lambda: window.chat.turns_done > done, timeout=WAIT)
    second = window.chat_view.messages[-1]
    assert second.shown.id != first_id and second.version_label.text() == "2/2"
    assert second.shown.status == "complete"
    assert window.bridge._live is session  # the preset differs per request only: no reload
    assert window.config.n_predict == 4 and page.panel.current.n_predict == 4
    second_run = second.shown.stats.run_id
    with Store.open(default_path(), recover=False) as store:
        assert store.siblings(second.shown.id).count == 2
        assert len(store.token_rows(first_run)) == 16
        assert len(store.token_rows(second_run)) == 4
    qtbot.waitUntil(lambda: {first_run, second_run} <= listed_runs(window), timeout=WAIT)
