"""A window that remembers: a restart on the same data directory restores the geometry, the
dock layout, the theme, the conversation and the model with its settings; a remembered model
that has gone falls back to the bundled one with a notice. Everything is remembered in the
test's own data directory (WORKBENCH_DATA_DIR), never the user's."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPalette

from tests.ui.user_actions import send
from workbench.engine.model_defaults import model_defaults
from workbench.store import default_path
from workbench.ui.bridge import EngineBridge
from workbench.ui.db_worker import AsyncStore
from workbench.ui.qt_main_window import QtMainWindow, _initial_size
from workbench.ui.qt_theme import DARK_PLOTS, LIGHT_PLOTS
from workbench.ui.window_memory import load_memory, memory_file, startup_config


def window_on(qtbot, run, config, load=True) -> QtMainWindow:
    db = run(AsyncStore.open(default_path()))
    window = QtMainWindow(EngineBridge(), db, config)
    qtbot.addWidget(window)
    window.show()
    run(window.start(load_model=load))
    return window


def quit_window(run, window) -> None:
    """As the app ends: the window closes, then shuts down (which writes what it remembers)."""
    window.close()
    run(window.shutdown())


def window_colour() -> int:
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness()


def test_a_restart_restores_layout_theme_conversation_and_model(qtbot, run, data_dir,
                                                                model_config):
    first = window_on(qtbot, run, model_config.replace(n_predict=6, temp=0.7, min_p=0.1))
    send(qtbot, first, "Hello there.")
    conversation = first.chat.conversation_id
    first.set_theme("dark")
    assert window_colour() < 128 and first.telemetry.colours == DARK_PLOTS
    first.runs_dock.setFloating(True)
    first.expert_dock.close()  # its close button
    # Qt keeps a restored window on its screen (offscreen: 800 x 800, narrower than the
    # window's minimum width), so the height is what shows the geometry came back.
    first.resize(first.width(), 700)
    assert first.height() == 700 != _initial_size().height()
    quit_window(run, first)
    saved = json.loads(memory_file(data_dir).read_text())
    assert saved["theme"] == "dark" and saved["conversation_id"] == conversation

    # The command line starts from what was remembered (run_window_cmd).
    start = startup_config(load_memory(data_dir))
    assert start.notice == "" and start.config.model == model_config.model
    assert (start.config.temp, start.config.min_p, start.config.n_predict) == (0.7, 0.1, 6)
    second = window_on(qtbot, run, start.config)
    assert second.theme == "dark" and second._theme_actions["dark"].isChecked()
    assert second.telemetry.colours == DARK_PLOTS and window_colour() < 128
    assert second.chat.conversation_id == conversation
    assert second.chat_view.messages[0].shown.content == "Hello there."
    assert second.chat.model is not None and second.chat.model.config.min_p == 0.1
    assert second.runs_dock.isFloating()
    assert not second.expert_dock.isVisible()
    assert second.height() == 700
    second.set_theme("light")
    assert window_colour() >= 128 and second.telemetry.colours == LIGHT_PLOTS
    quit_window(run, second)
    assert load_memory(data_dir).theme == "light"


def test_a_vanished_model_falls_back_to_the_bundled_one_with_a_notice(qtbot, run, data_dir,
                                                                       model_config, tmp_path):
    gone = tmp_path / "gone.gguf"
    gone.write_bytes(b"")
    first = window_on(qtbot, run, model_config, load=False)
    first.memory.settings = model_config.replace(model=str(gone), n_ctx=1024).to_dict()
    quit_window(run, first)
    gone.unlink()
    start = startup_config(load_memory(data_dir))
    assert start.config == model_defaults() and "gone.gguf" in start.notice
    assert "is no longer there" in start.notice
    # The bundled model (here: the test's model, as the default) opens, and the window says why.
    second = window_on(qtbot, run, model_config.replace(model=""), load=False)
    second.load_model = _loaded_nothing  # the bundled model's load is not what is tested
    run(second.start(load_model=True))
    assert second.notice.kind == "info" and "gone.gguf" in second.notice.text
    quit_window(run, second)


async def _loaded_nothing(config, reopening=False):
    return None


def test_a_damaged_memory_file_opens_as_a_first_start(qtbot, run, data_dir, model_config):
    data_dir.mkdir(parents=True, exist_ok=True)
    memory_file(data_dir).write_text("{ not json")
    assert startup_config(load_memory(data_dir)).config == model_defaults()
    window = window_on(qtbot, run, model_config, load=False)
    assert window.theme == "system" and window.chat.conversation_id is None
    quit_window(run, window)
    assert json.loads(memory_file(data_dir).read_text())["theme"] == "system"  # rewritten whole


def test_system_theme_follows_the_desktop_scheme(qtbot, run, data_dir, model_config,
                                                 monkeypatch):
    hints = QGuiApplication.styleHints()
    window = window_on(qtbot, run, model_config, load=False)
    monkeypatch.setattr(type(hints), "colorScheme", lambda self: Qt.ColorScheme.Dark)
    window.set_theme("system")
    assert window.resolved_theme == "dark" and window_colour() < 128
    monkeypatch.setattr(type(hints), "colorScheme", lambda self: Qt.ColorScheme.Light)
    window._scheme_changed()
    assert window.resolved_theme == "light" and window_colour() >= 128
    quit_window(run, window)


def test_the_plots_take_the_themes_colours(qtbot, run, data_dir, model_config):
    from PySide6.QtGui import QColor

    window = window_on(qtbot, run, model_config, load=False)
    for theme, colours in (("dark", DARK_PLOTS), ("light", LIGHT_PLOTS)):
        window.set_theme(theme)
        panel = window.telemetry
        assert panel.graphics.backgroundBrush().color() == QColor(colours.background)
        plot = panel.plots["wall"] if "wall" in panel.plots else next(iter(panel.plots.values()))
        assert plot.getAxis("left").textPen().color() == QColor(colours.foreground)
        legends = [p.legend for p in panel.plots.values() if p.legend is not None]
        labels = [label for legend in legends for _, label in legend.items]
        assert labels and all(QColor(label.opts["color"]) == QColor(colours.foreground)
                              for label in labels)
        ink = panel._ink_curves
        assert ink and all(c.opts["pen"].color() == QColor(colours.ink) for c in ink)
        assert window.expert_map.graphics.backgroundBrush().color() == QColor(
            colours.background)
    quit_window(run, window)

