"""Two windows on one store: the second window's start-up recovery leaves the first window's
live answer alone (it is streaming in another process, which holds its writer lock), and the
first finishes and saves it. Both windows are real: the first is a child process on the real
model, the second opens here on the same data folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from workbench.store import Store, default_path

WAIT = 180_000


def test_a_second_window_leaves_the_first_windows_answer_alone(
        qtbot, make_window, data_dir: Path, embedded_model_path: Path):
    env = dict(os.environ, WORKBENCH_DATA_DIR=str(data_dir), QT_QPA_PLATFORM="offscreen")
    first = subprocess.Popen(
        [sys.executable, "-m", "workbench", "window", "-m", str(embedded_model_path),
         "-t", "2", "-c", "2048", "-n", "120", "--quit",
         "--send", "Count from 1 to 500, one number per line."],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        qtbot.waitUntil(lambda: default_path().exists() or first.poll() is not None,
                        timeout=WAIT)
        reader = Store.open(default_path(), recover=False)

        def answer():
            convs = reader.list_conversations()
            path = reader.active_path(convs[0].id) if convs else []
            return path[-1] if len(path) == 2 else None

        def streaming_with_text() -> bool:
            if first.poll() is not None:
                return True  # fails below with the child's stderr
            a = answer()
            return a is not None and a.status == "streaming" and bool(a.content)

        qtbot.waitUntil(streaming_with_text, timeout=WAIT)
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
        seen = answer().content

        second = make_window(load=False)  # its start-up recovery runs now
        assert second.db._store.recovered_on_open == 0
        assert answer().status in ("streaming", "complete")  # never "interrupted"
        assert len(second.conversation_list.ids()) == 1
        assert second.store_banner.kind == ""  # nothing to say: both windows work
        # Opened in the second window, a live answer says where it is being written.
        task = second.tasks.spawn(second.conversations.open(second.conversation_list.ids()[0]))
        qtbot.waitUntil(task.done, timeout=WAIT)
        shown = second.chat_view.messages[-1]
        if shown.shown.status == "streaming":
            assert "another workbench window" in shown.note.text()
        else:  # it finished first: nothing to say
            assert shown.shown.status == "complete" and not shown.note.text()

        # The first window goes on writing its answer, then saves it whole.
        # (Generous: a 2-core machine that runs something else streams 120 tokens slowly.)
        assert first.wait(timeout=2 * WAIT / 1000) == 0, first.stderr.read().decode()[-2000:]
        final = answer()
        reader.close()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        first.stderr.close()
    assert final.status == "complete"
    assert final.content.startswith(seen[:20]) and len(final.content) > len(seen)


def test_an_answer_whose_window_died_after_this_one_started_reads_interrupted(
        qtbot, make_window, data_dir: Path):
    """The other writer dies after this window's start-up recovery: opening the conversation
    checks again, so its answer reads "interrupted", not "being written"."""
    import signal

    from tests.unit.test_store_writers import REPO, WRITER

    window = make_window(load=False)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    other = subprocess.Popen([sys.executable, "-c", WRITER, str(default_path())],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=REPO, env=env)
    try:
        assert other.stdout is not None
        answer_id = int(other.stdout.readline().split()[0])
        other.send_signal(signal.SIGKILL)
        other.wait()
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    task = window.tasks.spawn(window.conversations.refresh())
    qtbot.waitUntil(task.done, timeout=WAIT)
    task = window.tasks.spawn(window.conversations.open(window.conversation_list.ids()[0]))
    qtbot.waitUntil(task.done, timeout=WAIT)
    shown = window.chat_view.messages[-1]
    assert shown.shown.id == answer_id
    assert shown.shown.status == "interrupted" and "Interrupted" in shown.note.text()
