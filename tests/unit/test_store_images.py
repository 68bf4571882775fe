"""Images in the store: kept once per content, in order, through edits, export and import."""

from __future__ import annotations

import json

import pytest

from workbench.moe.synth_mmproj import solid_png
from workbench.store import Store, new_image

RED = new_image(solid_png(8, 8, (255, 0, 0)), "red.png")
BLUE = new_image(solid_png(8, 8, (0, 0, 255)), "blue.png")


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "db.sqlite") as s:
        yield s


def _count(store, table):
    return store._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_images_are_kept_in_order_and_once_per_content(store):
    conv = store.create_conversation()
    first = store.add_message(conv.id, None, "user", "look", images=[RED, BLUE])
    second = store.add_message(conv.id, first.id, "user", "again", images=[RED])
    got = store.message_images([first.id, second.id])
    assert [i.sha256 for i in got[first.id]] == [RED.sha256, BLUE.sha256]
    assert got[first.id][0].data == RED.data and got[first.id][0].name == "red.png"
    assert [i.sha256 for i in got[second.id]] == [RED.sha256]
    assert _count(store, "images") == 2  # RED's bytes once


def test_a_reopened_file_still_has_the_images(tmp_path):
    path = tmp_path / "db.sqlite"
    with Store.open(path) as s:
        conv = s.create_conversation()
        m = s.add_message(conv.id, None, "user", "look", images=[RED])
    with Store.open(path) as s:
        assert s.message_images([m.id])[m.id][0].data == RED.data


def test_an_edited_message_keeps_its_images(store):
    conv = store.create_conversation()
    m = store.add_message(conv.id, None, "user", "look", images=[BLUE])
    edited = store.edit_message(m.id, "look closer")
    assert store.message_images([edited.id])[edited.id][0].sha256 == BLUE.sha256


def test_export_and_import_carry_the_images(store):
    conv = store.create_conversation("pictures")
    m = store.add_message(conv.id, None, "user", "look", images=[RED, BLUE])
    store.add_message(conv.id, m.id, "assistant", "noise")
    doc = store.export_json(conv.id)
    assert "red.png" in store.export_markdown(conv.id)
    copy = store.import_json(doc)
    path = store.active_path(copy.id)
    images = store.message_images([path[0].id])[path[0].id]
    assert [i.data for i in images] == [RED.data, BLUE.data]
    assert json.loads(store.export_json(copy.id))["messages"] == json.loads(doc)["messages"]


def test_an_import_whose_image_does_not_match_its_hash_is_refused(store):
    conv = store.create_conversation()
    store.add_message(conv.id, None, "user", "look", images=[RED])
    doc = json.loads(store.export_json(conv.id))
    doc["messages"][0]["images"][0]["sha256"] = BLUE.sha256
    before = len(store.list_conversations())
    with pytest.raises(ValueError, match="does not match"):
        store.import_json(doc)
    assert len(store.list_conversations()) == before  # nothing half-imported


def test_purging_a_conversation_removes_bytes_no_one_refers_to(store):
    a = store.create_conversation()
    b = store.create_conversation()
    store.add_message(a.id, None, "user", "x", images=[RED, BLUE])
    store.add_message(b.id, None, "user", "y", images=[RED])
    store.delete_conversation(a.id)
    store.purge_deleted()
    assert _count(store, "images") == 1  # BLUE went with a; RED is still b's
    assert _count(store, "message_images") == 1


def test_salvage_and_merging_carry_the_images(tmp_path):
    from workbench.store.salvage import copy_rows

    with Store.open(tmp_path / "src.db") as src, Store.open(tmp_path / "dst.db") as dst:
        conv = src.create_conversation()
        m = src.add_message(conv.id, None, "user", "look", images=[RED, BLUE])
        copied = copy_rows(src._db, dst._db)
        assert copied.messages == 1 and copied.skipped == 0
        (new_conv,) = dst.list_conversations()
        (new_m,) = dst.active_path(new_conv.id)
        assert new_m.id and m.id
        got = dst.message_images([new_m.id])[new_m.id]
        assert [i.data for i in got] == [RED.data, BLUE.data]
