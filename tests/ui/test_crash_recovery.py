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
        run_id = saved[-1].stats.run_id
        rows = store.token_rows(run_id) if run_id is not None else []
        store.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stderr.close()

    assert [m.status for m in saved] == ["complete", "complete", "complete", "streaming"]
    # Issue 12, case 5: the per-token telemetry is saved with the text, not only at the end.
    assert rows, "the killed answer kept text but none of its per-token rows"
    pieces = "".join(r["piece"] for r in rows)
    assert saved[-1].content.strip()[:10] in pieces or pieces.strip()[:10] in saved[-1].content
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
    # The plots show every token of the three answers, the interrupted one's included.
    with Store.open(default_path(), recover=False) as store:
        finished = sum(len(store.token_rows(m.stats.run_id)) for m in saved[:3]
                       if m.role == "assistant")
    qtbot.waitUntil(lambda: len(window.telemetry.ring) == finished + len(rows), timeout=WAIT)
    with Store.open(default_path(), recover=False) as store:
        interrupted = store.get_run(run_id)
    assert interrupted.interrupted and interrupted.n_token_rows == len(rows)
    from workbench.runs.entries import entry_from_run

    assert entry_from_run(interrupted).label.endswith("(interrupted)")
    # The interrupted answer is not the model's context: the next turn's history stops before.
    from workbench.ui.chat.context import model_history

    assert len(model_history(window.chat.path)) == 2
