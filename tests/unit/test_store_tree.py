"""Conversations as message trees: edits and regenerations add siblings, nothing is erased."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.store import MessageStats, NotFound, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "w.db") as s:
        yield s


def _texts(messages) -> list[str]:
    return [m.content for m in messages]


def test_a_new_conversation_is_empty(store: Store):
    conv = store.create_conversation("t")
    assert conv.active_leaf_id is None
    assert store.active_path(conv.id) == []


def test_adding_messages_moves_the_active_leaf(store: Store):
    conv = store.create_conversation()
    u = store.add_message(conv.id, None, "user", "q1")
    a = store.add_message(conv.id, u.id, "assistant", "a1", reasoning="thinking",
                          stats=MessageStats(n_generated=2))
    assert store.get_conversation(conv.id).active_leaf_id == a.id
    path = store.active_path(conv.id)
    assert [(m.role, m.content, m.parent_id) for m in path] == [
        ("user", "q1", None), ("assistant", "a1", u.id)]
    assert path[1].reasoning == "thinking" and path[1].stats == MessageStats(n_generated=2)


def test_edit_and_regenerate_make_siblings_and_erase_nothing(store: Store):
    conv = store.create_conversation()
    u1 = store.add_message(conv.id, None, "user", "q1")
    a1 = store.add_message(conv.id, u1.id, "assistant", "a1")
    u2 = store.add_message(conv.id, a1.id, "user", "q2")
    a2 = store.add_message(conv.id, u2.id, "assistant", "a2")

    regen = store.regenerate(a2.id)
    assert (regen.parent_id, regen.role, regen.status, regen.content) == (
        u2.id, "assistant", "streaming", "")
    assert _texts(store.active_path(conv.id)) == ["q1", "a1", "q2", ""]

    edited = store.edit_message(u2.id, "q2 edited")
    assert (edited.parent_id, edited.role) == (a1.id, "user")
    assert _texts(store.active_path(conv.id)) == ["q1", "a1", "q2 edited"]

    root_edit = store.edit_message(u1.id, "q1 edited")  # the first message has siblings too
    assert root_edit.parent_id is None
    assert _texts(store.active_path(conv.id)) == ["q1 edited"]

    assert len(store.all_messages(conv.id)) == 7  # every version is still there


def test_siblings_say_which_version_this_is(store: Store):
    conv = store.create_conversation()
    u = store.add_message(conv.id, None, "user", "q")
    a1 = store.add_message(conv.id, u.id, "assistant", "first")
    a2 = store.regenerate(a1.id)
    a3 = store.regenerate(a1.id)

    sib = store.siblings(a2.id)
    assert [m.id for m in sib.messages] == [a1.id, a2.id, a3.id]
    assert (sib.index, sib.count, sib.label) == (1, 3, "2 of 3")
    assert sib.previous.id == a1.id and sib.next.id == a3.id
    first = store.siblings(a1.id)
    assert first.label == "1 of 3" and first.previous is None
    assert store.siblings(a3.id).next is None
    assert store.siblings(u.id).label == "1 of 1"


def test_switching_branch_shows_the_newest_leaf_under_the_choice(store: Store):
    conv = store.create_conversation()
    u1 = store.add_message(conv.id, None, "user", "q1")
    a1 = store.add_message(conv.id, u1.id, "assistant", "a1")
    a1b = store.regenerate(a1.id)
    store.update_message(a1b.id, content="a1b", status="complete")
    u2 = store.add_message(conv.id, a1b.id, "user", "q2")
    store.add_message(conv.id, u2.id, "assistant", "a2")
    u1b = store.edit_message(u1.id, "q1b")
    store.add_message(conv.id, u1b.id, "assistant", "a1 for q1b")

    assert _texts(store.switch_branch(u1.id)) == ["q1", "a1b", "q2", "a2"]
    assert _texts(store.active_path(conv.id)) == ["q1", "a1b", "q2", "a2"]
    assert _texts(store.switch_branch(a1.id)) == ["q1", "a1"]
    assert _texts(store.switch_branch(u1b.id)) == ["q1b", "a1 for q1b"]


def test_newest_leaf_is_by_creation_time(store: Store):
    """Imported trees keep their times, so ids alone do not say which leaf is newest."""
    conv = store.create_conversation()
    u = store.add_message(conv.id, None, "user", "q", created_at=100.0)
    store.add_message(conv.id, u.id, "assistant", "newer", created_at=300.0)
    store.add_message(conv.id, u.id, "assistant", "older", created_at=200.0)
    assert _texts(store.switch_branch(u.id)) == ["q", "newer"]
    assert _texts(store.children(u.id)) == ["older", "newer"]


def test_set_active_leaf_can_stop_mid_branch(store: Store):
    conv = store.create_conversation()
    u = store.add_message(conv.id, None, "user", "q")
    store.add_message(conv.id, u.id, "assistant", "a")
    store.set_active_leaf(conv.id, u.id)
    assert _texts(store.active_path(conv.id)) == ["q"]
    assert _texts(store.path_to(u.id)) == ["q"]


def test_bad_references_are_refused(store: Store):
    one = store.create_conversation()
    other = store.create_conversation()
    u = store.add_message(one.id, None, "user", "q")
    with pytest.raises(ValueError):
        store.add_message(other.id, u.id, "assistant", "crossed")
    with pytest.raises(ValueError):
        store.set_active_leaf(other.id, u.id)
    with pytest.raises(NotFound):
        store.add_message(9999, None, "user", "nowhere")
    with pytest.raises(NotFound):
        store.add_message(one.id, 9999, "user", "orphan")
    with pytest.raises(ValueError):
        store.add_message(one.id, u.id, "robot", "?")
    with pytest.raises(ValueError):
        store.add_message(one.id, u.id, "assistant", "?", status="finished")
    with pytest.raises(KeyError):  # NotFound is a KeyError
        store.siblings(12345)
    assert _texts(store.active_path(one.id)) == ["q"]  # refused writes left nothing behind


def test_adding_a_message_moves_the_conversation_to_the_top(store: Store):
    first = store.create_conversation("first", created_at=1.0)
    store.create_conversation("second", created_at=2.0)
    store.add_message(first.id, None, "user", "bump")
    assert [c.title for c in store.list_conversations()] == ["first", "second"]
