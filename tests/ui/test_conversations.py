"""The conversation list: open, search, rename, delete with undo, export, import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from tests.full_disk import fill_the_disk
from workbench.atomic_write import OutputFileError
from workbench.store import MessageStats

WAIT = 30_000


def wait(qtbot, window, coro):
    task = window.tasks.spawn(coro)
    qtbot.waitUntil(task.done, timeout=WAIT)
    return task.result()


def seed(store) -> list[int]:
    ids = []
    for title, question, answer in (("Tea", "Why is tea green?", "Because of the leaves."),
                                    ("Boats", "How do boats float?", "Buoyancy.")):
        conv = store.create_conversation(title)
        user = store.add_message(conv.id, None, "user", question)
        store.add_message(conv.id, user.id, "assistant", answer,
                          stats=MessageStats(stop_reason="eos"))
        ids.append(conv.id)
    return ids


def test_open_search_rename(qtbot, make_window):
    window = make_window(load=False)
    tea, boats = wait(qtbot, window, window.db.call(seed))
    wait(qtbot, window, window.conversations.refresh())
    assert window.conversation_list.ids() == [boats, tea]  # newest first
    window.conversation_list.list.itemClicked.emit(window.conversation_list.item_for(tea))
    qtbot.waitUntil(lambda: window.chat.conversation_id == tea, timeout=WAIT)
    assert [w.shown.content for w in window.chat_view.messages] == [
        "Why is tea green?", "Because of the leaves."]
    assert "finished" in window.chat_view.messages[-1].stats.text()

    window.conversation_list.search.setText("buoyancy")
    qtbot.waitUntil(lambda: window.conversation_list.ids() == [boats], timeout=WAIT)
    assert "Buoyancy" in window.conversation_list.list.item(0).text()
    window.conversation_list.search.clear()
    qtbot.waitUntil(lambda: len(window.conversation_list.ids()) == 2, timeout=WAIT)

    item = window.conversation_list.item_for(tea)
    item.setText("Green tea")  # what an in-place edit does
    qtbot.waitUntil(lambda: window.conversation_list.item_for(tea).text() == "Green tea",
                    timeout=WAIT)
    title = wait(qtbot, window, window.db.call(lambda s: s.get_conversation(tea).title))
    assert title == "Green tea"


def test_delete_offers_undo(qtbot, make_window):
    window = make_window(load=False)
    tea, boats = wait(qtbot, window, window.db.call(seed))
    wait(qtbot, window, window.conversations.open(tea))
    wait(qtbot, window, window.conversations.delete(tea))
    assert window.conversation_list.ids() == [boats]
    assert window.chat.conversation_id is None and window.chat_view.messages == []
    assert window.notice.kind == "info" and "Deleted" in window.notice.text
    qtbot.mouseClick(window.notice.action, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: sorted(window.conversation_list.ids()) == sorted([tea, boats]),
                    timeout=WAIT)


def test_delete_removes_the_conversations_kept_states_from_disk(qtbot, make_window, data_dir):
    from workbench.ui.bridge import EngineBridge

    kv = data_dir / "kv"
    window = make_window(load=False, bridge=EngineBridge(kv_dir=kv))
    tea, boats = wait(qtbot, window, window.db.call(seed))
    kv.mkdir(parents=True, exist_ok=True)
    # States of tea made by two models (identities), one of boats, and a stranger's file.
    mine = [kv / f"{tea}.1111aaaa2222bbbb.kvstate", kv / f"{tea}.3333cccc4444dddd.kvstate"]
    others = [kv / f"{boats}.1111aaaa2222bbbb.kvstate", kv / f"{tea}0.1111aaaa2222bbbb.kvstate",
              kv / "notes.txt"]
    for path in mine + others:
        path.write_bytes(b"state")
    wait(qtbot, window, window.conversations.delete(tea))
    assert not any(p.exists() for p in mine)
    assert all(p.read_bytes() == b"state" for p in others)


def test_export_and_import_round_trip(qtbot, make_window, tmp_path: Path):
    window = make_window(load=False)
    tea, _ = wait(qtbot, window, window.db.call(seed))
    md, js = tmp_path / "tea.md", tmp_path / "tea.json"
    wait(qtbot, window, window.conversations.export_to(tea, "md", md))
    wait(qtbot, window, window.conversations.export_to(tea, "json", js))
    assert "Why is tea green?" in md.read_text() and "# Tea" in md.read_text()
    assert len(json.loads(js.read_text())["messages"]) == 2
    imported = wait(qtbot, window, window.conversations.import_from(js))
    new_id = imported.conversation.id
    assert imported.left_out == []
    assert new_id not in (tea,) and len(window.conversation_list.ids()) == 3
    wait(qtbot, window, window.conversations.open(new_id))
    assert [w.shown.content for w in window.chat_view.messages] == [
        "Why is tea green?", "Because of the leaves."]


def test_an_import_with_a_bad_setting_opens_and_names_what_was_left_out(
        qtbot, make_window, tmp_path: Path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    window = make_window(load=False)
    tea, _ = wait(qtbot, window, window.db.call(seed))
    js = tmp_path / "tea.json"
    wait(qtbot, window, window.conversations.export_to(tea, "json", js))
    doc = json.loads(js.read_text())
    doc["settings"] = {"temperature": "very hot", "system_prompt": "Be brief."}
    js.write_text(json.dumps(doc))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(js), ""))
    wait(qtbot, window, window.conversations.import_dialog())
    assert window.notice.kind == "info" and "temperature" in window.notice.text
    assert len(window.conversation_list.ids()) == 3
    assert [w.shown.content for w in window.chat_view.messages] == [
        "Why is tea green?", "Because of the leaves."]


def test_an_export_on_a_full_disk_keeps_the_earlier_export(qtbot, make_window, tmp_path: Path,
                                                           monkeypatch):
    """Issue 12, case 11 (a sibling): an export that cannot be written leaves no half file
    and keeps an earlier export of that name; the error says the disk is full."""
    window = make_window(load=False)
    tea, _ = wait(qtbot, window, window.db.call(seed))
    out = tmp_path / "tea.json"
    out.write_text("the earlier export")
    fill_the_disk(monkeypatch, budget=10)
    task = window.tasks.spawn(window.conversations.export_to(tea, "json", out))
    qtbot.waitUntil(task.done, timeout=WAIT)
    with pytest.raises(OutputFileError, match="the disk is full"):
        task.result()
    assert out.read_text() == "the earlier export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "tea.json"]
