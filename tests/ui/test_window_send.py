"""`window --send` with a model that fails to load (issue 12, case 3): the messages were
dropped and the command exited 0. Now stderr says so, with every message; the messages wait in
the composer for a model; the command exits 1; the data directory holds no temporary file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from workbench.store import Store, default_path
from workbench.ui.qt_app import send_all

SENDS = ["What is a mixture of experts?", "And a second question."]


def test_sends_without_a_model_are_kept_and_reported(make_window, run, model_config, tmp_path,
                                                     capsys):
    """Regression for issue 12, case 3 (in the window): nothing is sent, nothing is lost."""
    window = make_window(model_config.replace(model=str(tmp_path / "missing.gguf")))
    assert window.chat.model is None
    assert run(send_all(window, SENDS)) is False
    err = capsys.readouterr().err
    assert "missing.gguf" in err  # why: the load's own error
    assert "2 message(s) from --send were not sent" in err
    assert all(f"  {text}" in err for text in SENDS)
    assert window.composer.prompt.toPlainText() == "\n\n".join(SENDS)
    with Store.open(default_path()) as store:
        assert store.list_conversations() == []  # no half-sent message either


def test_sends_with_a_model_are_sent(make_window, run):
    """Control: with a model loaded, send_all sends (so the test above can fail)."""
    window = make_window()
    assert run(send_all(window, SENDS[:1])) is True
    assert window.composer.prompt.toPlainText() == ""
    assert [m.shown.role for m in window.chat_view.messages] == ["user", "assistant"]


def test_window_send_with_a_model_that_fails_to_load_exits_non_zero(tmp_path: Path):
    """Regression for issue 12, case 3, as the user runs it."""
    data = tmp_path / "data"
    env = {**os.environ, "WORKBENCH_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "window", "-m", str(tmp_path / "missing.gguf"),
         "--send", SENDS[0], "--quit"],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "error: Could not open missing.gguf" in proc.stderr
    assert f"  {SENDS[0]}" in proc.stderr
    leftovers = [p.name for p in data.iterdir()
                 if p.suffix in (".tmp", ".partial") or p.stat().st_size == 0]
    assert leftovers == []


def test_a_kv_path_occupied_by_a_file_or_junk_states_do_not_stop_an_answer(
        make_window, run, data_dir):
    """The window's conversations keep their state under <data>/kv; a file there instead of a
    folder, or junk named like states inside it, costs the state, never the answer, and is
    left as it was."""
    from workbench.ui.bridge import EngineBridge

    data_dir.mkdir(parents=True, exist_ok=True)
    occupied = data_dir / "kv"
    occupied.write_bytes(b"mine")
    window = make_window(bridge=EngineBridge(kv_dir=occupied))
    assert run(send_all(window, SENDS)) is True
    assert [m.shown.role for m in window.chat_view.messages] == ["user", "assistant"] * 2
    run(window.shutdown())  # states go to the spill at close: it must not touch the file
    assert occupied.read_bytes() == b"mine"

    junk = data_dir / "kv2"
    junk.mkdir()
    os.mkfifo(junk / "1.0123456789abcdef.kvstate")
    (junk / "2.kvstate").write_bytes(b"junk")
    (junk / "3.fedcba9876543210.kvstate").mkdir()
    other = make_window(bridge=EngineBridge(kv_dir=junk))
    assert run(send_all(other, SENDS[:1])) is True
    assert [m.shown.role for m in other.chat_view.messages][-1] == "assistant"
    run(other.shutdown())
    assert (junk / "3.fedcba9876543210.kvstate").is_dir()
    assert os.path.exists(junk / "1.0123456789abcdef.kvstate")
