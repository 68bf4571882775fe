"""MessageStats: the per-message stats as one typed record, and rows other versions wrote."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.store import MessageStats, Store, format_stats_line

# A row as an older window wrote it: fewer keys, one it no longer writes, one it never knew.
OLD_ROW = {"tokens_per_second": 11.5, "n_generated": 6, "stop_reason": "eos", "ttft_s": 0.25,
           "gpu_layers": 0}


def test_an_old_row_reads_with_missing_keys_none_and_unknown_ones_kept():
    stats = MessageStats.from_json(OLD_ROW)
    assert (stats.n_generated, stats.stop_reason, stats.ttft_s) == (6, "eos", 0.25)
    assert stats.tok_s is None and stats.run_id is None and stats.think_s is None
    assert stats.extra == {"tokens_per_second": 11.5, "gpu_layers": 0}
    assert stats.to_json() == OLD_ROW  # read and written again, nothing lost
    assert format_stats_line(stats) == "6 tokens · TTFT 0.25 s · finished"


def test_values_of_the_wrong_type_are_kept_but_not_read():
    stats = MessageStats.from_json({"n_generated": "6", "think_s": True, "n_past": 82.0,
                                    "run_id": None})
    assert stats.n_generated is None and stats.think_s is None and stats.run_id is None
    assert stats.n_past == 82 and isinstance(stats.n_past, int)  # a count written as 82.0
    assert stats.to_json() == {"n_past": 82, "n_generated": "6", "think_s": True, "run_id": None}
    assert MessageStats.from_json(None) == MessageStats.from_json({}) == MessageStats()


def test_json_leaves_out_what_was_not_measured_in_the_order_the_window_wrote():
    stats = MessageStats(stop_reason="length", n_generated=16, tok_s=41.2, run_id=3, x_start=0)
    assert list(stats.to_json()) == ["stop_reason", "n_generated", "tok_s", "run_id", "x_start"]
    assert MessageStats.from_json(stats.to_json()) == stats
    assert stats.replace(run_id=4).run_id == 4 and stats.run_id == 3  # a record: not changed


def test_an_old_row_in_the_database_reads_and_survives_export_and_import(tmp_path: Path):
    with Store.open(tmp_path / "w.db") as store:
        conv = store.create_conversation("old")
        user = store.add_message(conv.id, None, "user", "q")
        answer = store.add_message(conv.id, user.id, "assistant", "a")
        store._db.execute("UPDATE messages SET stats = ? WHERE id = ?",  # as an older version
                          (json.dumps(OLD_ROW), answer.id))
        assert store.get_message(answer.id).stats.n_generated == 6
        tree = store.export_tree(conv.id)
        assert tree["messages"][-1]["stats"] == OLD_ROW
        copy = store.import_json(tree)
        assert store.active_path(copy.id)[-1].stats == MessageStats.from_json(OLD_ROW)
