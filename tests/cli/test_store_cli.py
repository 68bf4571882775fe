"""`conversations` and `runs` over a real store file: what they print (text and --json), what
they refuse, and that they are safe beside an open window (another Store on the same file)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.engine.metrics import ModelIdentity, RunInfo, RunSummary, TokenMetrics
from workbench.engine.metrics_reader import read_metrics_csv
from workbench.store import MessageStats, Store

MIB = 1 << 20


def _info(threads: int = 2) -> RunInfo:
    return RunInfo(engine_version="0.1.0", llama_cpp_python_version="0.3.36",
                   model=ModelIdentity("/m/tiny.gguf", "tiny", 1234, "h1"), arch="qwen3moe",
                   n_layer=2, n_expert=8, n_expert_used=2, n_vocab=100, n_ctx_train=512,
                   chat_template=True,
                   settings={"n_threads": threads, "moe_stream": True, "cache_mb": 64})


def _rows(n: int = 30, slow_at: int = 17, wall: float = 10.0) -> list[TokenMetrics]:
    out = []
    for i in range(n):
        slow = i == slow_at
        out.append(TokenMetrics(
            step=i + 1, steps=n, turn=0, wall_ms=90.0 if slow else wall + 0.1 * (i % 3),
            cpu_ms=30.0 if slow else 2 * wall, majflt=0, majflt_mib=0.0, loop_overhead_ms=0.1,
            rss_mib=500.0, mem_available_mib=9000.0, io_ms=60.0 if slow else 0.5,
            read_bytes=20 * MIB if slow else MIB, piece=f" t{i}"))
    return out


def _summary(n: int = 30) -> RunSummary:
    return RunSummary(turn=0, n_generated=n, gen_seconds=0.4, n_prompt=12, n_reused=0,
                      n_past=42, n_ctx=512, load_seconds=0.5, prefill_seconds=0.05,
                      ttft_seconds=0.06, majflt_per_token=0.0, cpu_s_per_token=0.02,
                      loop_overhead_s_per_token=0.001, stop_reason="length")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "workbench.db"
    with Store.open(path) as store:
        rivers = store.create_conversation("Rivers", created_at=1000.0)
        q = store.add_message(rivers.id, None, "user", "Why do rivers bend?", created_at=1001.0)
        run = store.create_run(_info(), summary=_summary())
        store.add_token_rows(run.id, _rows())
        a = store.add_message(rivers.id, q.id, "assistant", "Because banks erode.",
                              stats=MessageStats(run_id=run.id), created_at=1002.0)
        store.attach_run(run.id, a.id)
        other = store.create_conversation("Empty one", created_at=2000.0)
        assert other.id == 2
        headless = store.create_run(_info(threads=1), summary=_summary(), label="bench")
        store.add_token_rows(headless.id, _rows(wall=20.0))
    return path


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_conversations_list_text_and_json(db, capsys):
    code, out, _ = cli(capsys, "conversations", "list", "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["id", "last", "used", "messages", "title"]
    assert lines[1].split()[0] == "2" and lines[1].endswith("Empty one")  # newest first
    assert lines[2].split()[0] == "1" and " 2 " in lines[2] and lines[2].endswith("Rivers")
    code, out, _ = cli(capsys, "conversations", "list", "--db", str(db), "--json")
    doc = json.loads(out)
    assert [(c["id"], c["title"], c["messages"]) for c in doc] == [(2, "Empty one", 0),
                                                                   (1, "Rivers", 2)]


def test_show_prints_the_branch_with_stats(db, capsys):
    code, out, _ = cli(capsys, "conversations", "show", "1", "--db", str(db))
    assert code == 0
    assert out.startswith("# Rivers  [conversation 1, 2 messages]")
    assert "You:\n  Why do rivers bend?" in out and "Assistant:\n  Because banks erode." in out
    code, out, _ = cli(capsys, "conversations", "show", "1", "--db", str(db), "--json")
    doc = json.loads(out)
    assert [m["role"] for m in doc["messages"]] == ["user", "assistant"]
    assert doc["messages"][1]["stats"]["run_id"] == 1


def test_export_then_import_gives_the_same_conversation(db, tmp_path, capsys):
    target = tmp_path / "rivers.json"
    code, _, err = cli(capsys, "conversations", "export", "1", "-o", str(target), "--db", str(db))
    assert code == 0 and "as json" in err
    original = json.loads(target.read_text())
    code, out, _ = cli(capsys, "conversations", "import", str(target), "--db", str(db))
    assert code == 0 and out.startswith("imported as conversation 3: Rivers")
    again = tmp_path / "again.json"
    assert cli(capsys, "conversations", "export", "3", "-o", str(again), "--db", str(db))[0] == 0
    copy = json.loads(again.read_text())
    assert copy["messages"] == original["messages"]
    assert len(copy["runs"]) == len(original["runs"]) == 1
    code, out, _ = cli(capsys, "conversations", "export", "1", "--db", str(db))
    assert out.startswith("# Rivers\n\n## User\n\nWhy do rivers bend?")  # Markdown by default


@pytest.mark.parametrize(("content", "message"), [
    ("# Rivers\n\nnot json", "is not JSON"),
    ('{"format": "something else"}', "not a workbench.conversation document"),
    ("[1, 2]", "not a conversation export"),
    ('{"format": "workbench.conversation", "version": 1, "messages": [{"id": 1, '
     '"parent": 7, "role": "user"}]}', "parent 7 not defined"),
])
def test_a_bad_import_says_why_and_adds_nothing(db, tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _, err = cli(capsys, "conversations", "import", str(bad), "--db", str(db))
    assert code == 1 and err.startswith("error: ") and message in err, err
    with Store.open(db) as store:
        assert len(store.list_conversations()) == 2


def test_delete_and_undo(db, capsys):
    code, out, _ = cli(capsys, "conversations", "delete", "2", "--db", str(db))
    assert code == 0 and "deleted conversation 2: Empty one" in out
    assert cli(capsys, "conversations", "delete", "2", "--db", str(db))[2].startswith(
        "error: conversation 2 is already deleted")
    code, out, _ = cli(capsys, "conversations", "list", "--deleted", "--db", str(db))
    assert "Empty one" in out
    code, out, _ = cli(capsys, "conversations", "delete", "2", "--undo", "--db", str(db))
    assert code == 0 and "restored conversation 2" in out
    assert "Empty one" in cli(capsys, "conversations", "list", "--db", str(db))[1]


@pytest.mark.parametrize("args", [
    ("conversations", "show", "99"), ("conversations", "delete", "99"),
    ("conversations", "export", "99"), ("runs", "show", "99"), ("runs", "compare", "1", "99"),
])
def test_an_unknown_id_is_a_clear_error(db, capsys, args):
    code, out, err = cli(capsys, *args, "--db", str(db))
    assert code == 1 and out == ""
    assert err.startswith("error: no ") and "99" in err


def test_no_store_is_a_clear_error_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "none.db"
    code, _, err = cli(capsys, "conversations", "list", "--db", str(missing))
    assert code == 1 and f"no store at {missing}" in err
    assert not missing.exists()


def test_bad_ids_are_refused_by_the_parser(db, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["runs", "show", "abc", "--db", str(db)])
    assert exc.value.code == 2
    assert "'abc' is not an id" in capsys.readouterr().err


def test_runs_list_filters_and_json(db, capsys):
    code, out, _ = cli(capsys, "runs", "list", "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["id", "when", "model", "tokens"]
    assert "headless bench" in lines[1] and "conversation 1" in lines[2]
    code, out, _ = cli(capsys, "runs", "list", "--conversation", "1", "--json", "--db", str(db))
    doc = json.loads(out)
    assert [(r["id"], r["conversation"], r["tokens"]) for r in doc] == [(1, 1, 30)]
    assert doc[0]["tok_s"] == pytest.approx(30 / 0.4)
    code, out, _ = cli(capsys, "runs", "list", "--headless", "--json", "--db", str(db))
    assert [r["id"] for r in json.loads(out)] == [2]


def test_runs_show_explains_the_slow_token_and_writes_its_csv(db, tmp_path, capsys):
    target = tmp_path / "run1.csv"
    code, out, _ = cli(capsys, "runs", "show", "1", "--csv", str(target), "--db", str(db))
    assert code == 0
    assert out.startswith("run 1 (conversation 1)")
    assert "decode rate tok/s: 75.00" in out
    assert "token 18: 90 ms" in out and "20 MiB of experts read from disk" in out
    assert "waited 60 ms on expert reads" in out
    mf = read_metrics_csv(target)
    assert len(mf.rows) == 30 and mf.rows[17]["wall_ms"] == 90.0
    code, out, _ = cli(capsys, "runs", "show", "1", "--json", "--db", str(db))
    doc = json.loads(out)
    slow = doc["explain"][0]["slow"]
    assert [s["token"] for s in slow] == [18]
    assert [c["key"] for c in slow[0]["causes"]] == ["reads", "io"]


def test_runs_compare_prints_the_table(db, capsys):
    code, out, _ = cli(capsys, "runs", "compare", "1", "2", "--db", str(db))
    assert code == 0
    assert out.startswith("Compare: 2 arms") and "decode rate" in out
    assert "n_threads" in out  # the configuration difference
    code, out, _ = cli(capsys, "runs", "compare", "1", "2", "--json", "--db", str(db))
    doc = json.loads(out)
    rate = next(f for f in doc["figures"] if f["key"] == "tok_s")
    assert rate["cells"][1]["ratio"]["estimate"] < 1  # run 2 decodes at half the rate
    code, _, err = cli(capsys, "runs", "compare", "1", "--db", str(db))
    assert code == 1 and "two runs or more" in err


def _subprocess(*args: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_safe_beside_an_open_window(db, tmp_path):
    """Another Store holds the file open with an answer streaming (as the window does): the
    commands read and write beside it, and never take its live answer for a crashed one."""
    with Store.open(db) as window:
        conv = window.create_conversation("Live")
        q = window.add_message(conv.id, None, "user", "Count to ten.")
        live = window.add_message(conv.id, q.id, "assistant", "one two", status="streaming")
        listed = _subprocess("conversations", "list", "--json", "--db", str(db))
        assert listed.returncode == 0, listed.stderr
        assert "Live" in [c["title"] for c in json.loads(listed.stdout)]
        export = tmp_path / "live.json"
        assert _subprocess("conversations", "export", str(conv.id), "-o", str(export),
                           "--db", str(db)).returncode == 0
        imported = _subprocess("conversations", "import", str(export), "--db", str(db))
        assert imported.returncode == 0, imported.stderr
        deleted = _subprocess("conversations", "delete", "2", "--db", str(db))
        assert deleted.returncode == 0, deleted.stderr
        # The window sees the commands' writes, and its answer streams on.
        assert window.get_message(live.id).status == "streaming"
        window.update_message(live.id, content="one two three", status="complete")
        titles = [c.title for c in window.list_conversations()]
        assert titles.count("Live") == 2 and "Empty one" not in titles
        assert window.get_message(live.id).content == "one two three"


def test_a_write_held_by_the_window_is_waited_for_then_refused_clearly(db):
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the window in the middle of a write, for too long
    try:
        proc = _subprocess("conversations", "delete", "2", "--db", str(db))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: the store is busy") and "nothing was changed" in \
        proc.stderr, proc.stderr
    with Store.open(db) as store:
        assert store.get_conversation(2).deleted_at is None


def test_every_command_has_help(capsys):
    for args in (["conversations"], ["conversations", "list"], ["conversations", "export"],
                 ["conversations", "import"], ["conversations", "delete"],
                 ["conversations", "show"], ["runs"], ["runs", "list"], ["runs", "show"],
                 ["runs", "compare"], ["explain"]):
        with pytest.raises(SystemExit) as exc:
            main([*args, "--help"])
        assert exc.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: python -m workbench " + " ".join(args)), args
        assert len(out.splitlines()) > 4

