"""The database survives a killed process: a child window is killed mid-answer; the conversation
reopens with every prior message and the partial answer marked interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from workbench.store import Store, default_path

WAIT = 180_000


def test_a_killed_window_loses_at_most_a_second(qtbot, make_window, data_dir: Path,
                                                embedded_model_path: Path):
    env = dict(os.environ, WORKBENCH_DATA_DIR=str(data_dir), QT_QPA_PLATFORM="offscreen")
    child = subprocess.Popen(
        [sys.executable, "-m", "workbench", "window", "-m", str(embedded_model_path),
         "-t", "2", "-c", "2048", "-n", "120",
         "--send", "Say hello.", "--send", "Count from 1 to 500, one number per line."],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        qtbot.waitUntil(lambda: default_path().exists() or child.poll() is not None,
                        timeout=WAIT)
        store = Store.open(default_path(), recover=False)  # a reader beside the child

        def partial_answer_saved() -> bool:
            if child.poll() is not None:
                return True  # fails below with the child's stderr
            convs = store.list_conversations()
            path = store.active_path(convs[0].id) if convs else []
            return len(path) == 4 and path[-1].status == "streaming" and bool(path[-1].content)

        qtbot.waitUntil(partial_answer_saved, timeout=WAIT)
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        os.kill(child.pid, signal.SIGKILL)  # no chance to save anything more
        child.wait()
        saved = store.active_path(store.list_conversations()[0].id)
        store.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stderr.close()

    assert [m.status for m in saved] == ["complete", "complete", "complete", "streaming"]
    window = make_window(load=False)
    assert len(window.conversation_list.ids()) == 1
    task = window.tasks.spawn(window.conversations.open(window.conversation_list.ids()[0]))
    qtbot.waitUntil(task.done, timeout=WAIT)
    shown = window.chat_view.messages
    assert [w.shown.content for w in shown[:3]] == [m.content for m in saved[:3]]
    partial = shown[-1]
    assert partial.shown.status == "interrupted" and partial.badge.text() == "interrupted"
    assert partial.shown.content.startswith(saved[-1].content[:20])
    assert "Interrupted" in partial.note.text()
    # The interrupted answer is not the model's context: the next turn's history stops before.
    from workbench.ui.chat.context import model_history

    assert len(model_history(window.chat.path)) == 2
