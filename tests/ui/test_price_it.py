"""Every lossy setting in the panel shows its last measured cost on this model, or "Not
measured" with Price it, which scores in the background (never on the UI thread) with progress,
can be stopped, and records a scored run whose cost the panel then shows."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.unit.test_scored_runs import report
from workbench.bench import quality
from workbench.bench.quality import save_scored_run
from workbench.config import Config
from workbench.store import Store
from workbench.ui.settings.qt_settings_panel import QtSettingsPanel

MODEL = "/m/tiny.gguf"


def shown(widget) -> bool:
    return not widget.isHidden()


def scored_runs(tmp_path: Path, **settings: object) -> list:
    with Store.open(tmp_path / "w.db") as store:
        save_scored_run(store, report(0.5, model=MODEL, **settings))
        return store.list_runs(scored=True)


def test_a_lossy_setting_shows_its_measured_cost_or_offers_to_price_it(qtbot, tmp_path):
    panel = QtSettingsPanel(Config(model=MODEL))
    qtbot.addWidget(panel)
    assert {"n_expert_used", "drop_cold_frac", "expert_substitute"} <= set(panel.costs)
    line = panel.costs["n_expert_used"]
    assert not shown(line)  # at its default the setting is lossless: nothing to price
    panel.set_scored_runs(scored_runs(tmp_path, n_expert_used=1))
    panel.set_pending(panel.pending.replace(n_expert_used=1))
    assert shown(line) and line.text.text().startswith("Measured: KL ")
    assert "ppl " in line.text.text() and "faster" in line.text.text()
    assert "95 % intervals" in line.text.toolTip() and "run #1" in line.text.toolTip()
    # Another rung, or another model: not measured, and Price it is offered.
    panel.set_pending(panel.pending.replace(n_expert_used=2))
    assert line.text.text().startswith("Not measured") and shown(line.price_button)
    assert line.price_button.isEnabled()
    panel.set_pending(Config(model="/m/other.gguf", n_expert_used=1))
    assert line.text.text().startswith("Not measured")
    # Price it hands the pending settings to whoever runs the pricing.
    with qtbot.waitSignal(panel.price_requested) as got:
        line.price_button.click()
    assert got.args[0] == "n_expert_used" and got.args[1].n_expert_used == 1
    # While one setting is priced, the others wait; its line shows progress and Stop.
    panel.set_pending(Config(model=MODEL, n_expert_used=1, moe_stream=True, cache_mb=64,
                             drop_cold_frac=0.5))
    panel.pricing_started("drop_cold_frac")
    panel.pricing_progress("reference", 3, 10)
    drop = panel.costs["drop_cold_frac"]
    assert shown(drop.progress) and shown(drop.stop_button) and drop.progress.value() == 3
    assert not line.price_button.isEnabled()
    with qtbot.waitSignal(panel.stop_pricing_requested):
        drop.stop_button.click()
    panel.pricing_finished("stopped")
    assert drop.text.text() == "Not measured on this model (stopped)"
    assert line.price_button.isEnabled()


@pytest.mark.slow  # reads the tiny model twice per pricing
@pytest.mark.parametrize("stop_early", [False, True], ids=["priced", "stopped"])
def test_price_it_scores_in_the_background_and_records_the_run(
        qtbot, run, tmp_path, tiny_moe_path, monkeypatch, stop_early):
    from workbench.ui.db_worker import AsyncStore
    from workbench.ui.settings.qt_settings_page import QtSettingsPage

    threads: list[threading.Thread] = []
    real = quality.score_text

    def spy(*args, **kwargs):
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(quality, "score_text", spy)
    from workbench.engine.session import Session

    engines: list[threading.Thread] = []  # the threads that opened the pricing's sessions
    real_open = Session.open.__func__

    def open_(cls, *args, **kwargs):
        engines.append(threading.current_thread())
        return real_open(cls, *args, **kwargs)

    monkeypatch.setattr(Session, "open", classmethod(open_))
    config = Config(model=str(tiny_moe_path), chat_template=False, n_ctx=256, n_threads=1,
                    n_ubatch=1, n_predict=32, moe_stream=True, cache_mb=2, o_direct=False)
    db = run(AsyncStore.open(tmp_path / "w.db"))
    page = QtSettingsPage(config, db.call)
    qtbot.addWidget(page)
    page.pricer.tokens = 24
    try:
        run(page.start())
        panel = page.panel
        panel.set_pending(config.replace(n_expert_used=1))
        line = panel.costs["n_expert_used"]
        assert line.text.text().startswith("Not measured") and line.price_button.isEnabled()
        seen: list[tuple[str, int, int]] = []
        panel.pricing_progress = lambda *p: (seen.append(p), QtSettingsPanel.pricing_progress(
            panel, *p), stop_early and page.pricer.stop())
        line.price_button.click()
        qtbot.waitUntil(lambda: line.pricing or not page.pricer.running, timeout=5000)
        run(page.tasks.wait_idle(), timeout=120_000)
        runs = run(db.call(lambda s: s.list_runs(scored=True)))
        assert threads and threading.main_thread() not in threads  # never the UI thread
        # Its llama.cpp work ran on a thread that has ended: one that stayed would keep a
        # second OpenMP team, and the window's own decodes ran 56 % slower after a pricing.
        assert engines and not any(t.is_alive() for t in engines)
        assert seen  # progress reached the line
        if stop_early:
            assert runs == [] and line.text.text() == "Not measured on this model (stopped)"
        else:
            assert [r.label for r in runs] == ["price"] and runs[0].settings["n_expert_used"] == 1
            assert len(runs[0].quality["series"]["kl"]) == 24
            assert line.text.text().startswith("Measured: KL ")
            assert shown(line.price_button) and line.price_button.text() == "Price again"
    finally:
        page.pricer.close()
        run(db.close())
