"""A damaged, newer or unwritable store: Store.open says which (a typed StoreFault) and writes
nothing to a damaged or newer file; a damaged one can be moved aside and salvaged."""

from __future__ import annotations

import json
import sqlite3
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from tests.store_files import (
    DAMAGES,
    corrupt_pages,
    damage,
    digest,
    filling_disk,
    newer_store,
    raw_settings,
    read_only_folder,
    real_store,
)
from tests.unit.test_store_runs import _info, _token
from workbench.store import (
    SCHEMA_VERSION,
    SchemaTooNew,
    Store,
    StoreDamaged,
    StoreFull,
    StoreUnwritable,
)
from workbench.store.faults import classify
from workbench.store.health import sidecars
from workbench.store.salvage import copy_rows, move_aside, salvage


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_file_is_named_and_left_untouched(tmp_path: Path, how: str):
    path = tmp_path / "workbench.db"
    damage(path, how)
    before = digest(path)
    with pytest.raises(StoreDamaged) as caught:
        Store.open(path)
    assert caught.value.path == path and caught.value.kind == "damaged"
    assert caught.value.detail  # what is wrong, for the message
    assert digest(path) == before
    # Nothing wrote a journal of changes beside it either.
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_newer_schema_says_which_version_it_needs(tmp_path: Path):
    path = tmp_path / "workbench.db"
    newer_store(path, writer="9.1.0")
    before = digest(path)
    with pytest.raises(SchemaTooNew) as caught:
        Store.open(path)
    fault = caught.value
    assert (fault.found, fault.known, fault.writer) == (SCHEMA_VERSION + 1, SCHEMA_VERSION,
                                                        "9.1.0")
    assert "9.1.0" in str(fault)
    assert digest(path) == before


def test_a_newer_user_version_alone_is_seen(tmp_path: Path):
    path = tmp_path / "workbench.db"
    real_store(path, 1, 1)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 50")
    conn.close()
    with pytest.raises(SchemaTooNew) as caught:
        Store.open(path)
    assert caught.value.found == 50 and caught.value.writer == ""


def test_each_step_records_the_workbench_that_applied_it(tmp_path: Path):
    from workbench import __version__

    path = tmp_path / "workbench.db"
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT version, app_version FROM schema_version").fetchall()
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    assert rows[-1] == (SCHEMA_VERSION, __version__) and user_version == SCHEMA_VERSION


def test_a_folder_that_is_a_file_is_unwritable(tmp_path: Path):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(StoreUnwritable) as caught:
        Store.open(blocker / "workbench.db")
    assert caught.value.kind == "unwritable"


def test_a_folder_in_place_of_the_file_is_unwritable(tmp_path: Path):
    (tmp_path / "workbench.db").mkdir()
    with pytest.raises(StoreUnwritable):
        Store.open(tmp_path / "workbench.db")


def test_a_read_only_folder_is_unwritable_and_a_copy_can_be_read(tmp_path: Path):
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "workbench.db"
    real_store(path, 3, 2)
    with read_only_folder(folder):
        with pytest.raises(StoreUnwritable):
            Store.open(path)
        # The window's fallback: a temporary store starting as a copy of the file.
        with Store.open_temporary(copy_of=path) as temp:
            assert temp.temporary and len(temp.list_conversations()) == 3
            temp.create_conversation("written while read-only")
        with pytest.raises(StoreUnwritable):  # a new file in a read-only folder
            Store.open(folder / "other.db")
    # Nothing was added: no WAL, no second file (the writers' folder is from real_store).
    assert sorted(p.name for p in folder.iterdir()) == ["workbench.db", "workbench.db-writers"]


def test_a_full_disk_at_open_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    filling_disk(monkeypatch, pages=2)  # a new file cannot even hold its tables
    with pytest.raises(StoreFull) as caught:
        Store.open(tmp_path / "workbench.db")
    assert caught.value.kind == "full"


def test_a_disk_that_fills_while_in_use_is_named(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "workbench.db"
    real_store(path, 1, 1)
    filling_disk(monkeypatch)  # capped at its size now: the next new page does not fit
    with Store.open(path) as store:
        conv = store.create_conversation("fills up")
        with pytest.raises(sqlite3.OperationalError) as caught:
            for _ in range(50):
                store.add_message(conv.id, None, "user", "x" * 20_000)
        assert isinstance(classify(caught.value, path), StoreFull)
        # The store still works for what fits, and what was committed is there.
        assert store.get_conversation(conv.id).title == "fills up"


def test_os_errors_are_classified(tmp_path: Path):
    import errno

    assert isinstance(classify(OSError(errno.ENOSPC, "No space left on device"), tmp_path),
                      StoreFull)
    assert isinstance(classify(OSError(errno.EROFS, "Read-only file system"), tmp_path),
                      StoreUnwritable)
    assert classify(ValueError("a bug"), tmp_path) is None


# ---- moving aside and salvage -------------------------------------------------------------------


def test_move_aside_keeps_the_file_and_its_side_files(tmp_path: Path):
    path = tmp_path / "workbench.db"
    damage(path, "corrupt middle pages")
    wal = path.with_name("workbench.db-wal")
    wal.write_bytes(b"wal bytes")
    before = digest(path)
    aside = move_aside(path, now=0)
    assert aside.name.startswith("workbench.db.damaged-19700101-") or aside.name.startswith(
        "workbench.db.damaged-1970")
    assert not path.exists() and not wal.exists()
    assert digest(aside) == before
    assert aside.with_name(aside.name + "-wal").read_bytes() == b"wal bytes"
    again = tmp_path / "workbench.db"
    damage(again, "text file")
    second = move_aside(again, now=0)  # the same second: a name of its own
    assert second != aside and second.exists() and aside.exists()


def test_salvage_copies_every_readable_row_from_corrupt_pages(tmp_path: Path):
    path = tmp_path / "workbench.db"
    made = real_store(path)
    damage_path = tmp_path / "damaged.db"
    damage(damage_path, "corrupt middle pages")
    before = digest(damage_path)
    with Store.open(tmp_path / "fresh.db") as fresh:
        report = salvage(damage_path, fresh._db, cli=None)
        assert report.method == "row by row"
        copied = report.copied
        # Most rows are readable; the corrupt pages lose a few.
        assert copied.conversations >= made["conversations"] * 0.8
        assert 0.8 * made["messages"] <= copied.messages < made["messages"]
        assert copied.unreadable >= 1
        convs = fresh.list_conversations()
        assert len(convs) == copied.conversations
        # Every salvaged conversation opens on a branch of readable messages. One conversation's
        # messages fit in one page, so each of the three corrupt pages may empty one of them
        # (which do depends on the page layout: a schema step that adds tables shifts it).
        shown = [fresh.active_path(c.id) for c in convs]
        assert sum(1 for p in shown if p) >= len(convs) - 3
        assert all(m.content.startswith("message ") for p in shown for m in p)
        assert fresh.search("lorem")  # the search index covers them
    assert digest(damage_path) == before  # read-only


def test_salvage_with_the_sqlite3_command(tmp_path: Path):
    """The sqlite3 program's .recover, when installed, is preferred. The Debian sqlite3 3.40.1
    on the development machine fails .recover even on a sound file ("SQL logic error"), so this
    uses a stand-in program that prints SQL the way .recover does, from a readable copy."""
    source = tmp_path / "readable.db"
    real_store(source, 5, 4)
    fake = tmp_path / "sqlite3"
    fake.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import sqlite3, sys
        conn = sqlite3.connect({str(source)!r})
        print("BEGIN;")
        for line in conn.iterdump():
            if line not in ("BEGIN TRANSACTION;", "COMMIT;"):
                print(line)
        print("COMMIT;")
        """))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    damaged = tmp_path / "damaged.db"
    damage(damaged, "text file")
    with Store.open(tmp_path / "fresh.db") as fresh:
        report = salvage(damaged, fresh._db, cli=str(fake))
        assert report.method == "sqlite3 .recover"
        assert (report.copied.conversations, report.copied.messages) == (5, 20)
        assert [len(fresh.active_path(c.id)) for c in fresh.list_conversations()] == [4] * 5


def test_a_broken_sqlite3_command_falls_back_to_rows(tmp_path: Path):
    fake = tmp_path / "sqlite3"
    fake.write_text("#!/bin/sh\necho 'sql error: SQL logic error (1)' >&2\nexit 1\n")
    fake.chmod(0o755)
    damaged = tmp_path / "damaged.db"
    damage(damaged, "corrupt middle pages")
    with Store.open(tmp_path / "fresh.db") as fresh:
        report = salvage(damaged, fresh._db, cli=str(fake))
    assert report.method == "row by row" and report.copied.messages > 0
    assert "SQL logic error" in report.problems[0]


def test_nothing_readable_salvages_nothing_and_says_so(tmp_path: Path):
    damaged = tmp_path / "damaged.db"
    damage(damaged, "text file")
    with Store.open(tmp_path / "fresh.db") as fresh:
        report = salvage(damaged, fresh._db, cli=None)
        assert report.copied.conversations == 0 and report.problems
        assert fresh.list_conversations() == []


def test_copy_rows_maps_every_reference(tmp_path: Path):
    """Merging one store into another (a temporary store into the real one): new ids, and the
    tree, the active leaf, the runs and a message's run all follow."""
    from workbench.store import MessageStats

    with Store.open(tmp_path / "a.db") as src, Store.open(tmp_path / "b.db") as dst:
        dst.create_conversation("already there")
        dst.add_message(dst.create_conversation("also").id, None, "user", "hi")
        dst.create_run(_info())  # so the copied run's id must change
        conv = src.create_conversation("moved")
        u = src.add_message(conv.id, None, "user", "q")
        a = src.add_message(conv.id, u.id, "assistant", "first")
        b = src.regenerate(a.id)
        run = src.create_run(_info(), message_id=b.id)
        src.add_token_rows(run.id, [_token(0), _token(1)])
        src.update_message(b.id, content="second", status="complete",
                           stats=MessageStats(run_id=run.id, n_generated=3))
        src.save_preset("fast", {"temp": 0.1})
        copied = copy_rows(src._db, dst._db)
        assert (copied.conversations, copied.messages, copied.runs, copied.token_rows,
                copied.presets) == (1, 3, 1, 2, 1)
        moved = next(c for c in dst.list_conversations() if c.title == "moved")
        path = dst.active_path(moved.id)
        assert [m.content for m in path] == ["q", "second"]
        assert dst.siblings(path[-1].id).count == 2
        new_run = dst.list_runs(message_id=path[-1].id)[0]
        assert new_run.id != run.id and path[-1].stats.run_id == new_run.id
        assert new_run.n_token_rows == 2
        assert [r["step"] for r in dst.token_rows(new_run.id)] == [0, 1]
        assert {p.name for p in dst.list_presets()} == {"fast"}


def test_copy_rows_adds_only_what_a_copy_gained(tmp_path: Path):
    """A temporary store that started as a copy of the file: only its new rows go back."""
    path = tmp_path / "workbench.db"
    real_store(path, 2, 2)
    temp = Store.open_temporary(copy_of=path)
    old = temp.list_conversations()[0]
    temp.add_message(old.id, temp.active_path(old.id)[-1].id, "user", "added later")
    temp.create_conversation("new one")
    with Store.open(path) as real:
        copied = copy_rows(temp._db, real._db, keep=temp.seeded)
        assert (copied.conversations, copied.messages) == (1, 1)
        assert len(real.list_conversations()) == 3
        assert real.active_path(old.id)[-1].content == "added later"
    temp.close()


def _pirate(i: int) -> dict[str, object]:
    return {"system_prompt": f"Talk like pirate {i}.", "temp": 0.7, "top_p": 0.9}


def test_salvage_keeps_each_conversation_s_own_settings(tmp_path: Path):
    damaged = tmp_path / "damaged.db"
    real_store(damaged)
    with Store.open(damaged) as store:
        for conv in store.list_conversations():
            store.set_conversation_settings(conv.id, _pirate(int(conv.title.split()[-1])))
    corrupt_pages(damaged)
    with Store.open(tmp_path / "fresh.db") as fresh:
        report = salvage(damaged, fresh._db, cli=None)
        assert report.copied.unreadable >= 1  # damaged indeed
        convs = [c for c in fresh.list_conversations() if c.title.startswith("conversation ")]
        assert len(convs) >= 30
        for conv in convs:
            assert fresh.conversation_settings(conv.id) == _pirate(int(conv.title.split()[-1]))


def test_salvage_keeps_a_conversation_whose_settings_cannot_be_used(tmp_path: Path):
    """A settings value that cannot be read, or an entry that is not valid, is dropped; the
    conversation is kept with its title, tree and the rest of its settings."""
    damaged = tmp_path / "damaged.db"
    real_store(damaged, 6, 2)
    raw_settings(damaged, {
        "conversation 0": json.dumps(_pirate(0)),
        "conversation 1": None,
        "conversation 2": b"\xff\xfe not text",
        "conversation 3": "{not json",
        "conversation 4": "[1, 2]",
        "conversation 5": json.dumps({"system_prompt": "Arr.", "temp": "hot", "top_k": -3,
                                      "n_ctx": 99}),
    })
    with Store.open(tmp_path / "fresh.db") as fresh:
        report = salvage(damaged, fresh._db, cli=None)
        assert (report.copied.conversations, report.copied.messages) == (6, 12)
        assert report.copied.skipped == 0
        by_title = {c.title: c for c in fresh.list_conversations()}
        assert sorted(by_title) == [f"conversation {i}" for i in range(6)]
        assert all(len(fresh.active_path(c.id)) == 2 for c in by_title.values())
        settings = {t: fresh.conversation_settings(c.id) for t, c in by_title.items()}
        assert settings == {"conversation 0": _pirate(0), "conversation 1": {},
                            "conversation 2": {}, "conversation 3": {}, "conversation 4": {},
                            "conversation 5": {"system_prompt": "Arr."}}


def test_merging_a_temporary_store_carries_conversation_settings(tmp_path: Path):
    """What a temporary store (a copy of a read-only file) set on a conversation the file has,
    and on one of its own, goes back with Try again."""
    path = tmp_path / "workbench.db"
    real_store(path, 2, 2)
    with Store.open(path) as real:
        untouched = real.list_conversations()[1]
        real.set_conversation_settings(untouched.id, _pirate(1))
    temp = Store.open_temporary(copy_of=path)
    kept = temp.list_conversations()[0]
    temp.set_conversation_settings(kept.id, _pirate(0))
    new = temp.create_conversation("new one")
    temp.set_conversation_settings(new.id, _pirate(2))
    with Store.open(path) as real:
        copy_rows(temp._db, real._db, keep=temp.seeded)
        assert real.conversation_settings(kept.id) == _pirate(0)
        assert real.conversation_settings(untouched.id) == _pirate(1)
        (merged,) = [c for c in real.list_conversations() if c.title == "new one"]
        assert real.conversation_settings(merged.id) == _pirate(2)
    temp.close()


def test_sidecars_follow_the_name():
    assert [p.name for p in sidecars(Path("/x/w.db"))] == ["w.db-wal", "w.db-shm", "w.db-journal"]


def test_a_database_locked_by_another_program_is_busy_not_damaged(tmp_path: Path):
    from workbench.store import StoreBusy

    path = tmp_path / "workbench.db"
    real_store(path, 1, 1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        other = sqlite3.connect(path, timeout=0)
        with pytest.raises(sqlite3.OperationalError) as caught:
            other.execute("INSERT INTO presets (name, updated_at) VALUES ('x', 0)")
        other.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    fault = classify(caught.value, path)
    assert isinstance(fault, StoreBusy) and fault.kind == "busy"
