"""Streaming answers: throttled updates reach the file, and a killed process loses at most the
last update, the answer coming back marked "interrupted"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.store import MessageStats, NotFound, Store

REPO = Path(__file__).resolve().parents[2]


def test_updates_persist_across_reopen(tmp_path: Path):
    path = tmp_path / "w.db"
    with Store.open(path) as store:
        conv = store.create_conversation()
        u = store.add_message(conv.id, None, "user", "q")
        a = store.add_message(conv.id, u.id, "assistant", status="streaming")
        for text in ("The", "The answer", "The answer is"):  # what a 1 s throttle would send
            store.update_message(a.id, content=text, reasoning="hmm " + text)
    with Store.open(path, recover=False) as store:
        msg = store.get_message(a.id)
        assert (msg.content, msg.reasoning, msg.status) == (
            "The answer is", "hmm The answer is", "streaming")
        store.update_message(a.id, content="The answer is 42.", status="complete",
                             stats=MessageStats(n_generated=6, stop_reason="eos",
                                                extra={"tokens_per_second": 11.5}))
    with Store.open(path) as store:
        msg = store.get_message(a.id)
        assert (msg.content, msg.status) == ("The answer is 42.", "complete")
        assert msg.reasoning == "hmm The answer is"  # not passed, so unchanged
        assert msg.stats.to_json() == {"n_generated": 6, "tokens_per_second": 11.5,
                                       "stop_reason": "eos"}
        assert store.recover_interrupted() == 0  # a finished answer is left alone


def test_open_recovers_what_a_crash_left_streaming(tmp_path: Path):
    path = tmp_path / "w.db"
    store = Store.open(path)
    conv = store.create_conversation()
    a = store.add_message(conv.id, None, "assistant", "half", status="streaming")
    # Abandoned without close(), as a crash would: the connection goes, and so does the writer
    # lock (the kernel drops a dead process's flock; tests/unit/test_store_writers.py kills one).
    store._db.close()
    store.writer.release()
    with Store.open(path) as reopened:
        assert reopened.recovered_on_open == 1
        msg = reopened.get_message(a.id)
        assert (msg.status, msg.content) == ("interrupted", "half")


def test_error_and_stop_are_kept(tmp_path: Path):
    with Store.open(tmp_path / "w.db") as store:
        conv = store.create_conversation()
        u = store.add_message(conv.id, None, "user", "q")
        a = store.add_message(conv.id, u.id, "assistant", status="streaming")
        store.update_message(a.id, status="error", error="context overflow")
        b = store.regenerate(a.id)
        store.update_message(b.id, content="partial", status="stopped")
        assert (store.get_message(a.id).status, store.get_message(a.id).error) == (
            "error", "context overflow")
        assert store.get_message(b.id).status == "stopped"
        with pytest.raises(ValueError):
            store.update_message(b.id, status="done")
        with pytest.raises(NotFound):
            store.update_message(4242, content="x")
        store.update_message(b.id)  # nothing to change: a no-op, not an error
        assert store.get_message(b.id).content == "partial"


def test_recover_marks_only_streaming_messages(tmp_path: Path):
    with Store.open(tmp_path / "w.db") as writer:
        conv = writer.create_conversation()
        u = writer.add_message(conv.id, None, "user", "q")
        done = writer.add_message(conv.id, u.id, "assistant", "done")
        left = writer.add_message(conv.id, u.id, "assistant", "half", status="streaming")
        assert writer.recover_interrupted() == 0  # its own answer: it is writing it now
    # The writer closed without finishing the answer (a close is not a crash, but the answer
    # has no live writer any more either way).
    with Store.open(tmp_path / "w.db", recover=False) as store:
        assert store.recover_interrupted() == 1
        assert store.get_message(left.id).status == "interrupted"
        assert store.get_message(left.id).content == "half"
        assert store.get_message(done.id).status == "complete"
        assert store.recover_interrupted() == 0


CHILD = textwrap.dedent(
    """
    import sys
    from workbench.store import Store

    store = Store.open(sys.argv[1])
    conv = store.create_conversation("crash test")
    u = store.add_message(conv.id, None, "user", "tell me a story")
    a = store.add_message(conv.id, u.id, "assistant", status="streaming")
    print("ids", conv.id, u.id, a.id, flush=True)
    i = 0
    while True:  # streams until killed; each update is one commit, as the UI's throttle does
        i += 1
        store.update_message(a.id, content=" ".join(f"w{k}" for k in range(i)),
                             reasoning=f"r{i}")
        print("wrote", i, flush=True)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_writer_loses_nothing_committed(tmp_path: Path):
    path = tmp_path / "w.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                             text=True, cwd=REPO, env=env)
    try:
        assert child.stdout is not None
        ids = child.stdout.readline().split()
        assert ids[0] == "ids", ids
        conv_id, user_id, answer_id = map(int, ids[1:])
        seen = 0
        while seen < 20:  # kill it mid-stream, after at least 20 committed updates
            line = child.stdout.readline()
            assert line.startswith("wrote"), line
            seen = int(line.split()[1])
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    with Store.open(path, recover=False) as store:
        assert store.get_message(answer_id).status == "streaming"  # as the crash left it
    with Store.open(path) as store:
        assert store.recovered_on_open == 1
        assert store.recover_interrupted() == 0  # already done by open
        path_msgs = store.active_path(conv_id)
        assert [(m.id, m.role) for m in path_msgs] == [(user_id, "user"),
                                                       (answer_id, "assistant")]
        assert path_msgs[0].content == "tell me a story"
        answer = path_msgs[1]
        assert answer.status == "interrupted"
        # The last committed update: the one reported, or one more written before the kill.
        written = int(answer.reasoning[1:])
        assert written >= seen
        assert answer.content == " ".join(f"w{k}" for k in range(written))
        assert [c.title for c in store.list_conversations()] == ["crash test"]
