"""`workbench score` from the command line: figures printed, bad inputs refused with exit 1."""

from __future__ import annotations

import json
import os

from workbench.cli.main import main
from workbench.store import Store


def test_score_prints_the_figures_as_json(tiny_moe_path, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("two white flashes, then dark; two white flashes, then dark")
    rc = main(["score", str(text), "-m", str(tiny_moe_path), "--tokens", "24", "-t", "1",
               "--no-chat-template", "-c", "256", "--moe-stream", "--n-expert-used", "1",
               "--json", "--db", str(tmp_path / "w.db")])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_scored"] == 24 and out["setting"]["settings"]["n_expert_used"] == 1
    assert out["quality"]["kl_mean"][0] > 0 and out["kl_ms_per_position"] > 0
    # The scored run is a run: recorded with its figures, one token row per position.
    with Store.open(tmp_path / "w.db") as store:
        run = store.get_run(out["run"])
        rows = store.token_rows(run.id)
    assert run.scored and run.settings["n_expert_used"] == 1 and len(rows) == 24
    assert run.quality["figures"]["kl_mean"] == out["quality"]["kl_mean"]
    reference = run.quality["reference"]  # the settings off the defaults: read whole, no override
    assert len(run.quality["series"]["kl"]) == 24
    assert "moe_stream" not in reference and "n_expert_used" not in reference
    assert run.run_summary().n_generated == 24 and all(r["read_bytes"] >= 0 for r in rows)
    # The text each position predicts, in order (the tiny model's byte vocabulary spells a space
    # as SentencePiece's U+2581, which it has no token to turn back; cut at 24 positions, the
    # last character is incomplete and reads as U+FFFD).
    pieces = "".join(r["piece"] for r in rows).replace("\u2581", " ").rstrip("\ufffd")
    assert pieces.strip() and pieces.strip() in text.read_text()
    assert main(["runs", "list", "--db", str(tmp_path / "w.db")]) == 0
    assert "score" in capsys.readouterr().out


def test_score_refuses_a_fifo_and_batches_of_dropping(tmp_path, capsys):
    fifo = tmp_path / "text"
    os.mkfifo(fifo)
    assert main(["score", str(fifo)]) == 1
    assert "named pipe" in capsys.readouterr().err
    text = tmp_path / "t.txt"
    text.write_text("some text")
    assert main(["score", str(text), "--batched", "8", "--moe-stream", "--cache-mb", "64",
                 "--drop-cold-frac", "0.5"]) == 1
    assert "batch routes every position" in capsys.readouterr().err


def test_score_choices_is_recorded_as_a_run(tiny_moe_path, tmp_path, capsys):
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        '{"question": "Two and two?", "choices": ["four", "five"], "answer": 0}\n'
        '{"question": "Sky colour?", "choices": ["green", "blue", "red"], "answer": "B"}\n'
        '{"question": "Ice is?", "choices": ["hot", "cold"], "answer": "cold"}\n')
    db = tmp_path / "w.db"
    rc = main(["score", "--choices", str(questions), "-m", str(tiny_moe_path), "-t", "1",
               "--no-chat-template", "-c", "256", "--moe-stream", "--n-expert-used", "1",
               "--json", "--db", str(db)])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    with Store.open(db) as store:
        run = store.get_run(out["run"])
    assert run.label == "choices" and run.message_id is None
    assert run.settings["n_expert_used"] == 1
    record = run.quality["choices"]
    for key in ("accuracy_setting", "accuracy_reference", "lost_lines", "gained_lines",
                "mcnemar_p", "n_questions"):
        assert record[key] == out[key], key
    assert "n_expert_used" not in record["reference"]  # the lossless reference's settings
    assert not run.scored  # no text figures: nothing reads it as a scored text
    summary = run.run_summary()
    assert summary is not None and summary.n_generated > 0 and summary.gen_seconds > 0
    acc = 100 * out["accuracy_setting"][0]
    assert main(["runs", "list", "--db", str(db)]) == 0
    listed = capsys.readouterr().out
    assert "headless choices: q.jsonl, 3 questions: accuracy" in listed
    assert f"{acc:.1f} %" in listed and "McNemar p=" in listed
    assert main(["runs", "show", str(run.id), "--db", str(db)]) == 0
    assert "choices (letter): q.jsonl, 3 questions" in capsys.readouterr().out
    assert main(["runs", "list", "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["choices"]["mcnemar_p"] == out["mcnemar_p"]
    # --no-record keeps nothing.
    assert main(["score", "--choices", str(questions), "-m", str(tiny_moe_path), "-t", "1",
                 "--no-chat-template", "-c", "256", "--no-record", "--db", str(db)]) == 0
    capsys.readouterr()
    with Store.open(db) as store:
        assert len(store.list_runs()) == 1
