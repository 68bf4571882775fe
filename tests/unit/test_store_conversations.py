"""Conversations: list, rename, delete with undo and purge, and search (FTS5 and LIKE)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.store import NotFound, Store
from workbench.store.search import fts5_available

FTS = fts5_available(sqlite3.connect(":memory:"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "w.db") as s:
        yield s


def test_create_rename_list(store: Store):
    a = store.create_conversation("alpha", created_at=10.0)
    b = store.create_conversation("beta", created_at=20.0)
    assert [c.title for c in store.list_conversations()] == ["beta", "alpha"]
    renamed = store.rename_conversation(a.id, "alpha 2")
    assert renamed.title == "alpha 2" and renamed.updated_at > b.updated_at
    assert [c.title for c in store.list_conversations()] == ["alpha 2", "beta"]
    with pytest.raises(NotFound):
        store.rename_conversation(999, "x")
    with pytest.raises(NotFound):
        store.get_conversation(999)


def test_delete_undo_purge(store: Store):
    keep = store.create_conversation("keep")
    gone = store.create_conversation("gone")
    u = store.add_message(gone.id, None, "user", "q")
    store.add_message(gone.id, u.id, "assistant", "a")

    store.delete_conversation(gone.id)
    assert [c.title for c in store.list_conversations()] == ["keep"]
    assert [c.title for c in store.list_deleted()] == ["gone"]
    assert store.get_conversation(gone.id).deleted_at is not None
    assert store.purge_deleted(older_than=3600) == 0  # deleted just now: kept for undo

    restored = store.undo_delete(gone.id)
    assert restored.deleted_at is None
    assert {c.title for c in store.list_conversations()} == {"keep", "gone"}
    assert [m.content for m in store.active_path(gone.id)] == ["q", "a"]

    store.delete_conversation(gone.id)
    assert store.purge_deleted() == 1
    assert [c.id for c in store.list_conversations(include_deleted=True)] == [keep.id]
    with pytest.raises(NotFound):
        store.get_message(u.id)  # the messages went with it
    with pytest.raises(NotFound):
        store.undo_delete(gone.id)
    with pytest.raises(NotFound):
        store.delete_conversation(gone.id)


def _chat(store: Store, title: str, *texts: str) -> int:
    conv = store.create_conversation(title)
    parent = None
    for i, text in enumerate(texts):
        parent = store.add_message(conv.id, parent, ("user", "assistant")[i % 2], text).id
    return conv.id


@pytest.fixture(params=[pytest.param(True, id="fts5"), pytest.param(False, id="like")])
def search_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param and not FTS:
        pytest.skip("this sqlite has no FTS5")
    with Store.open(tmp_path / "w.db", use_fts=request.param) as s:
        assert s.uses_fts is request.param
        yield s


def test_search_finds_text_in_any_branch_and_in_titles(search_store: Store):
    store = search_store
    pasta = _chat(store, "Dinner ideas", "How do I cook pasta?", "Boil water, add salt.")
    rust = _chat(store, "Borrow checker", "Why does the borrow checker complain?", "Lifetimes.")
    u = store.active_path(rust)[0]
    store.edit_message(u.id, "Explain ownership of a pasta struct")  # a branch off screen
    store.switch_branch(u.id)

    hits = store.search("pasta")
    assert {h.conversation.id for h in hits} == {pasta, rust}
    by_conv = {h.conversation.id: h for h in hits}
    assert by_conv[rust].message_id is not None
    assert "pasta" in store.get_message(by_conv[rust].message_id).content

    title_hits = store.search("dinner")
    assert [(h.conversation.id, h.message_id) for h in title_hits] == [(pasta, None)]
    assert title_hits[0].snippet == "Dinner ideas"
    assert title_hits[0].spans == [(0, 6)]

    # Every word must occur (here in one message), case does not matter.
    assert [h.conversation.id for h in store.search("BOIL salt")] == [pasta]
    assert store.search("boil lifetimes") == []
    assert store.search("   ") == []


def test_search_snippets_mark_the_match(search_store: Store):
    store = search_store
    long_text = "word " * 60 + "needle in the haystack " + "word " * 60
    conv = _chat(store, "t", long_text)
    [hit] = store.search("needle")
    assert hit.conversation.id == conv
    assert "needle" in hit.snippet and len(hit.snippet) < len(long_text)
    assert "…" in hit.snippet
    assert [hit.snippet[a:b].lower() for a, b in hit.spans] == ["needle"]


def test_search_skips_deleted_and_survives_odd_queries(search_store: Store):
    store = search_store
    conv = _chat(store, "t", 'Price is 50% off, "quoted" text_with_underscore')
    store.update_message(store.active_path(conv)[0].id, content="updated needle text")
    assert [h.conversation.id for h in store.search("needle")] == [conv]
    for query in ('"', "50%", "-", "AND", "needle OR", "a*b", "NEAR("):
        store.search(query)  # may find nothing, must not raise
    store.delete_conversation(conv)
    assert store.search("needle") == []
    store.undo_delete(conv)
    assert [h.conversation.id for h in store.search("needle")] == [conv]


def test_like_search_treats_wildcards_literally(tmp_path: Path):
    with Store.open(tmp_path / "w.db", use_fts=False) as store:
        _chat(store, "t", "no percent sign here")
        hit_conv = _chat(store, "t2", "save 50% today")
        assert [h.conversation.id for h in store.search("50%")] == [hit_conv]
        assert store.search("_") == []


@pytest.mark.skipif(not FTS, reason="this sqlite has no FTS5")
def test_index_catches_up_after_writes_without_fts(tmp_path: Path):
    """A file written where FTS5 was off is re-indexed the next time FTS5 is on."""
    path = tmp_path / "w.db"
    with Store.open(path) as store:
        first = _chat(store, "t", "written with the index on")
    with Store.open(path, use_fts=False) as store:
        second = _chat(store, "t", "written with the index off")
    with Store.open(path) as store:
        assert store.uses_fts
        assert {h.conversation.id for h in store.search("written")} == {first, second}
        assert [h.conversation.id for h in store.search("off")] == [second]
