"""The window opens whatever state its database file is in, says what happened in its store
banner and offers what fits; nothing of the user's is lost (real files, real SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from tests.store_files import (
    DAMAGES,
    damage,
    digest,
    filling_disk,
    newer_store,
    read_only_folder,
    real_store,
)
from workbench.store import SCHEMA_VERSION, Store
from workbench.ui import store_notices
from workbench.ui.qt_app import open_window

WAIT = 60_000


@pytest.fixture
def open_on(qtbot, run, model_config):
    """open_on(data_dir) -> a started window (no model) over that data folder; shut down after."""
    windows = []

    def factory(data: Path):
        window = run(open_window(model_config, data))
        window.show()
        windows.append(window)
        run(window.start(load_model=False))
        return window

    yield factory
    # Not qtbot.addWidget: pytest-qt would delete the widgets before this teardown, under the
    # pages' background refreshes that start() spawned. Shut down first, as qt_app.main does.
    for window in windows:
        run(window.shutdown())
        window.close()
        window.deleteLater()


def _labels(window) -> list[str]:
    return [b.text() for b in window.store_banner.buttons]


def _click(qtbot, window, label: str) -> None:
    button = next(b for b in window.store_banner.buttons if b.text() == label)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_store_opens_the_window_and_is_kept(open_on, tmp_path: Path, how: str):
    data = tmp_path / "data"
    data.mkdir()
    damage(data / "workbench.db", how)
    before = digest(data / "workbench.db")
    window = open_on(data)
    banner = window.store_banner
    assert banner.kind == "error" and "is damaged" in banner.text
    assert "never written to" in banner.text and "temporary store" in banner.text
    assert _labels(window) == [store_notices.SALVAGE, store_notices.START_FRESH]
    assert not banner.close_button.isVisible()  # it stays while nothing is saved
    assert "temporary store" in window.windowTitle()
    assert window.db.temporary and window.conversation_list.ids() == []
    assert digest(data / "workbench.db") == before


def test_salvage_keeps_the_damaged_file_and_everything_readable(
        qtbot, open_on, run, tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    damage(data / "workbench.db", "corrupt middle pages")
    before = digest(data / "workbench.db")
    window = open_on(data)
    # The user wrote something in the temporary store before choosing.
    run(window.db.call(lambda s: s.add_message(s.create_conversation("meanwhile").id, None,
                                               "user", "written before salvage")))
    _click(qtbot, window, store_notices.SALVAGE)
    qtbot.waitUntil(lambda: window.store_banner.kind == "info", timeout=WAIT)
    text = window.store_banner.text
    assert "moved to" in text and "(kept)" in text and "Salvaged" in text
    assert "What you wrote meanwhile (1 conversation, 1 message)" in text
    aside = next(p for p in data.iterdir() if ".damaged-" in p.name and p.name[-4:] != "-wal"
                 and not p.name.endswith("-shm"))
    assert aside.name in text and digest(aside) == before
    assert not window.db.temporary and window.windowTitle() == "Workbench"
    assert window.store_banner.close_button.isVisible()
    ids = window.conversation_list.ids()
    assert len(ids) > 30  # of 40: the corrupt pages cost a few
    run(window.shutdown())
    with Store.open(data / "workbench.db", recover=False) as fresh:  # a sound file now
        titles = {c.title for c in fresh.list_conversations()}
    assert "meanwhile" in titles and "conversation 0" in titles


def test_move_aside_starts_fresh_and_keeps_the_file(qtbot, open_on, tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    damage(data / "workbench.db", "text file")
    before = digest(data / "workbench.db")
    window = open_on(data)
    _click(qtbot, window, store_notices.START_FRESH)
    qtbot.waitUntil(lambda: window.store_banner.kind == "info", timeout=WAIT)
    assert "A new, empty database is in use" in window.store_banner.text
    aside = [p for p in data.iterdir() if ".damaged-" in p.name]
    assert len(aside) == 1 and digest(aside[0]) == before
    assert (data / "workbench.db").exists() and not window.db.temporary


def test_a_newer_store_says_which_version_it_needs(open_on, tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    newer_store(data / "workbench.db", writer="9.1.0")
    before = digest(data / "workbench.db")
    window = open_on(data)
    text = window.store_banner.text
    assert f"schema version {SCHEMA_VERSION + 1}, by workbench 9.1.0" in text
    assert "workbench 9.1.0 or newer" in text and f"up to {SCHEMA_VERSION}" in text
    assert _labels(window) == [] and window.db.temporary
    assert digest(data / "workbench.db") == before


def test_a_read_only_folder_runs_on_a_copy_then_saves_when_writable(
        qtbot, open_on, run, tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    real_store(data / "workbench.db", 3, 2)
    before = digest(data / "workbench.db")
    with read_only_folder(data):
        window = open_on(data)
        text = window.store_banner.text
        assert "cannot be written" in text and "copy of your 3 conversations" in text
        assert _labels(window) == [store_notices.TRY_AGAIN]
        assert len(window.conversation_list.ids()) == 3  # still there to read
        run(window.db.call(lambda s: s.create_conversation("while read-only")))
        _click(qtbot, window, store_notices.TRY_AGAIN)  # still read-only: said again
        qtbot.waitUntil(lambda: window.notice.kind == "error", timeout=WAIT)
        assert "cannot be written" in window.store_banner.text
        assert digest(data / "workbench.db") == before
    _click(qtbot, window, store_notices.TRY_AGAIN)
    qtbot.waitUntil(lambda: window.store_banner.kind == "info", timeout=WAIT)
    assert "is in use again" in window.store_banner.text
    assert "What you wrote meanwhile (1 conversation, 0 messages)" in window.store_banner.text
    assert len(window.conversation_list.ids()) == 4
    run(window.shutdown())
    with Store.open(data / "workbench.db") as store:
        assert len(store.list_conversations()) == 4


def test_a_folder_that_cannot_exist_still_opens_the_window(open_on, tmp_path: Path):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")
    window = open_on(blocker)
    assert "cannot be written" in window.store_banner.text and window.db.temporary


def test_a_full_disk_runs_on_a_temporary_store_until_there_is_space(
        qtbot, open_on, run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A new store on a "disk" with room for two pages: SQLITE_FULL while creating its tables.
    lift = filling_disk(monkeypatch, pages=2)
    data = tmp_path / "data"
    window = open_on(data)
    assert "is full" in window.store_banner.text and window.db.temporary
    assert _labels(window) == [store_notices.TRY_AGAIN]
    run(window.db.call(lambda s: s.create_conversation("written while full")))
    lift()  # space was freed
    _click(qtbot, window, store_notices.TRY_AGAIN)
    qtbot.waitUntil(lambda: window.store_banner.kind == "info", timeout=WAIT)
    assert window.conversation_list.ids() and not window.db.temporary


def test_a_disk_that_fills_while_in_use_says_so(run, open_on, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    data.mkdir()
    real_store(data / "workbench.db", 1, 1)
    filling_disk(monkeypatch)  # the file cannot grow past its size from now on
    window = open_on(data)
    assert window.store_banner.kind == "" and not window.db.temporary

    def fill(store):
        conv = store.create_conversation("big")
        for _ in range(50):
            store.add_message(conv.id, None, "user", "x" * 20_000)

    with pytest.raises(Exception, match="full"):
        run(window.db.call(fill))
    banner = window.store_banner
    assert banner.kind == "error" and "is full: the last change was not saved" in banner.text
    assert banner.close_button.isVisible()


def test_a_full_disk_while_chatting_keeps_the_message_and_says_why(
        qtbot, make_window, data_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """The real send path on the real model: the user's message does not fit on the disk."""
    real_store(data_dir / "workbench.db", 1, 1)
    filling_disk(monkeypatch)  # the file cannot grow from now on
    window = make_window()
    assert not window.db.temporary
    text = "Please keep this. " + "A long message that needs new pages. " * 600
    window.composer.prompt.setPlainText(text)
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.store_banner.kind == "error", timeout=WAIT)
    assert "is full: the last change was not saved" in window.store_banner.text
    assert window.composer.prompt.toPlainText() == text  # nothing typed is lost
    assert not window.chat.generating
