"""MessageStats: the per-message stats as one typed record, and rows other versions wrote."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.store import MessageStats, Store, continued_stats, format_stats_line

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


# Two runs of one answer as the window stores them: the question's, then a Continue's, whose
# prompt is a re-read of one token from the KV memory.
FIRST = MessageStats(stop_reason="length", n_generated=69, n_prompt=46, n_reused=0, n_past=115,
                     n_ctx=512, prefill_s=0.15, ttft_s=0.16, tok_s=81.2, prefill_tok_s=306.7,
                     gen_s=0.85, run_id=7, x_start=0, kv_source="fresh")
SECOND = MessageStats(stop_reason="eos", n_generated=64, n_prompt=1, n_reused=114, n_past=179,
                      n_ctx=512, prefill_s=0.01, ttft_s=0.02, tok_s=53.33, prefill_tok_s=100.0,
                      gen_s=1.2, run_id=8, kv_source="memory")


def test_a_continued_answer_s_stats_describe_all_of_its_runs():
    both = continued_stats(FIRST, SECOND)
    assert both.n_generated == 133 and both.gen_s == 2.05
    assert both.tok_s == round(133 / 2.05, 2)  # all tokens over all decode time, not a mean
    assert (both.n_prompt, both.prefill_s, both.ttft_s, both.n_reused, both.kv_source) == (
        46, 0.15, 0.16, 0, "fresh")  # the question's prompt, not the re-read
    assert (both.stop_reason, both.n_past, both.run_id, both.x_start) == ("eos", 179, 8, 0)
    assert both.n_continued == 1
    assert format_stats_line(both) == ("64.9 tok/s · 133 tokens · prefill 46 tokens in 0.15 s"
                                       " · TTFT 0.16 s · 0 reused · continued 1× · finished")
    again = continued_stats(both, SECOND.replace(stop_reason="length"))
    assert (again.n_generated, again.n_continued, again.stop_reason) == (197, 2, "length")
    assert MessageStats.from_json(again.to_json()) == again  # stored as it is shown


def test_a_continued_answer_s_sums_stay_honest_about_what_was_not_measured():
    # A row from before gen_s was stored: its decode time is its tokens over its rate.
    old = FIRST.replace(gen_s=None, tok_s=80.0)
    assert continued_stats(old, SECOND).gen_s == round(69 / 80.0 + 1.2, 4)
    # A run whose count is unknown (it failed without a summary) leaves the total unknown.
    failed = MessageStats(stop_reason="error")
    both = continued_stats(FIRST, failed)
    assert both.n_generated is None and both.tok_s is None and both.gen_s is None
    assert format_stats_line(both) == ("prefill 46 tokens in 0.15 s · TTFT 0.16 s · 0 reused"
                                       " · continued 1× · failed")
    # Thinking: summed; a run that did not reason adds 0 s, one of unmeasured time makes the
    # total unmeasured rather than too small.
    thought = FIRST.replace(n_think=20, think_s=1.5)
    summed = continued_stats(thought, SECOND.replace(n_think=12, think_s=0.5))
    assert (summed.n_think, summed.think_s) == (32, 2.0)
    assert continued_stats(thought, SECOND).think_s == 1.5
    assert continued_stats(thought.replace(think_s=None), SECOND).think_s is None
    assert continued_stats(FIRST, SECOND).n_think is None  # no reasoning: not "0 tokens"
    # Keys this version does not know survive the merge.
    assert continued_stats(FIRST.replace(extra={"gpu_layers": 0}), SECOND).extra == {
        "gpu_layers": 0}
