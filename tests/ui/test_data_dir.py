"""The window keeps its data where it is told: the commands that need a clean slate (screenshot,
bench ui) pass a directory instead of changing the process's environment."""

from __future__ import annotations

from workbench.ui.models.recent import load_recent, recent_file
from workbench.ui.qt_app import open_window


def test_a_window_opened_on_a_directory_keeps_everything_there(qtbot, run, tmp_path,
                                                                model_config, monkeypatch):
    user_data = tmp_path / "user"
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(user_data))  # where the default would go
    chosen = tmp_path / "chosen"
    window = run(open_window(model_config, chosen))
    qtbot.addWidget(window)
    try:
        run(window.start(load_model=True))
        assert (chosen / "workbench.db").exists()
        # The list is saved off the UI thread, after the load.
        qtbot.waitUntil(lambda: load_recent(recent_file(chosen)) == [model_config.model],
                        timeout=30_000)
        assert window.runs_page.data == chosen
    finally:
        run(window.shutdown())
    assert not user_data.exists()
