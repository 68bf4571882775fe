"""Two writers on one store: a second Store's start-up recovery leaves the answer a live process
is streaming alone, and marks "interrupted" only what a dead one left (real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.store import Store
from workbench.store.writers import WriterLock, live_writers, lock_dir

REPO = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import sys
    from workbench.store import Store

    store = Store.open(sys.argv[1])
    conv = store.create_conversation("live")
    u = store.add_message(conv.id, None, "user", "count")
    a = store.add_message(conv.id, u.id, "assistant", "1 2 3", status="streaming")
    print(a.id, store.writer.token, flush=True)
    sys.stdin.readline()  # the other store has opened meanwhile
    store.update_message(a.id, content="1 2 3 4 5 6")
    print("wrote", flush=True)
    if sys.stdin.readline().strip() == "finish":
        store.update_message(a.id, content="1 2 3 4 5 6 7", status="complete")
        store.close()
        print("done", flush=True)
    else:
        sys.stdin.readline()  # streams on until killed
    """
)


def _writer(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _say(child: subprocess.Popen[str], line: str) -> str:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(line + "\n")
    child.stdin.flush()
    return child.stdout.readline().strip()


def test_a_second_store_leaves_a_live_answer_streaming(tmp_path: Path):
    path = tmp_path / "workbench.db"
    child = _writer(path)
    try:
        assert child.stdout is not None
        answer_id, token = child.stdout.readline().split()
        with Store.open(path) as second:  # the second window's start-up, recovery included
            assert second.recovered_on_open == 0
            assert second.get_message(int(answer_id)).status == "streaming"
            assert second.other_writers() == {token}
            assert _say(child, "") == "wrote"  # the first goes on writing its answer
            assert second.get_message(int(answer_id)).content == "1 2 3 4 5 6"
            assert _say(child, "finish") == "done"
            answer = second.get_message(int(answer_id))
            assert (answer.status, answer.content) == ("complete", "1 2 3 4 5 6 7")
            assert second.other_writers() == set()
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_dead_writers_answer_is_interrupted_even_beside_a_live_store(tmp_path: Path):
    path = tmp_path / "workbench.db"
    with Store.open(path) as bystander:  # a window that stays open throughout
        mine = bystander.add_message(bystander.create_conversation("mine").id, None,
                                     "assistant", "mine so far", status="streaming")
        child = _writer(path)
        try:
            assert child.stdout is not None
            answer_id, token = child.stdout.readline().split()
            assert token in live_writers(path)
            child.send_signal(signal.SIGKILL)  # no close: the kernel drops its lock
            child.wait()
        finally:
            child.kill()
            child.wait()
        assert token not in live_writers(path)
        assert not (lock_dir(path) / f"{token}.lock").exists()  # the dead one's file went
        with Store.open(path) as third:
            assert third.recovered_on_open == 1
            assert third.get_message(int(answer_id)).status == "interrupted"
            assert third.get_message(mine.id).status == "streaming"  # the bystander's, live


def test_answers_from_before_locks_are_recovered(tmp_path: Path):
    """A streaming answer with no recorded writer (written by an older build) has no live
    owner: recovery marks it, as it always did."""
    path = tmp_path / "workbench.db"
    with Store.open(path) as store:
        conv = store.create_conversation()
        old = store.add_message(conv.id, None, "assistant", "old", status="streaming")
        store._db.execute("UPDATE messages SET owner = '' WHERE id = ?", (old.id,))
        with Store.open(path) as second:
            assert second.recovered_on_open == 1


def test_a_starting_lock_is_never_taken_for_a_dead_one(tmp_path: Path):
    path = tmp_path / "workbench.db"
    folder = lock_dir(path)
    folder.mkdir()
    stale = folder / ".123-abc.tmp"  # a writer that died between creating and renaming
    stale.write_text("")
    lock = WriterLock.take(path)
    assert lock is not None
    assert live_writers(path) == {lock.token}
    assert not stale.exists()  # unlocked: cleaned up
    lock.release()
    assert live_writers(path) == set() and not lock.file.exists()


def test_no_lock_where_the_folder_cannot_hold_one(tmp_path: Path):
    blocker = tmp_path / "workbench.db-writers"
    blocker.write_text("a file where the lock folder goes")
    assert WriterLock.take(tmp_path / "workbench.db") is None
    assert live_writers(tmp_path / "workbench.db") == set()
