"""The window's Qt-free parts: Markdown blocks, ring buffer, telemetry rows, context, recorder."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from workbench.engine.metrics import UNMEASURED, RunSummary, TokenMetrics
from workbench.engine.requests import GenerateResult, StopReason, TokenEvent
from workbench.ui.chat.context import model_history, status_note
from workbench.ui.chat.markdown_blocks import Block, split_blocks
from workbench.ui.chat.stats_line import stats_from_result, thought_label
from workbench.ui.chat.turn_recorder import TurnRecorder
from workbench.ui.telemetry.headline import HeadlineTracker
from workbench.ui.telemetry.ring_buffer import RingBuffer
from workbench.ui.telemetry.series import COLUMNS, metrics_getter, readout, row_values


def token(step: int, text: str = "", reasoning: str = "", **kw: float) -> TokenMetrics:
    base = dict(step=step, steps=8, turn=0, wall_ms=20.0, cpu_ms=30.0, majflt=0, majflt_mib=0.0,
                loop_overhead_ms=0.5, compute_ms=20.0, text=text, reasoning=reasoning,
                piece=f"p{step}")
    base.update(kw)
    return TokenMetrics(**base)


# ---- Markdown -------------------------------------------------------------------------------

def test_code_fences_become_their_own_blocks():
    text = "Intro *text*.\n\n```python\nprint(1)\n```\nAfter."
    assert split_blocks(text) == [
        Block("prose", "Intro *text*."),
        Block("code", "print(1)", "python", closed=True),
        Block("prose", "After."),
    ]


def test_prose_is_split_into_paragraphs_but_not_inside_a_list_item():
    text = "First *one*.\n\nSecond.\n  \n- item\n\n  its second paragraph\n\nLast."
    assert split_blocks(text) == [
        Block("prose", "First *one*."),
        Block("prose", "Second."),
        Block("prose", "- item\n\n  its second paragraph"),
        Block("prose", "Last."),
    ]


def test_an_open_fence_while_streaming_is_code_not_prose():
    blocks = split_blocks("Here:\n~~~\nx = 1\ny")
    assert blocks[-1] == Block("code", "x = 1\ny", "", closed=False)


def test_fence_needs_its_own_character_to_close():
    blocks = split_blocks("```\na\n~~~\nb\n```")
    assert blocks == [Block("code", "a\n~~~\nb", "", closed=True)]


# ---- ring buffer ----------------------------------------------------------------------------

def test_ring_buffer_keeps_the_newest_rows_contiguous_and_in_order():
    ring = RingBuffer(4, ["a", "b"])
    for i in range(10):
        ring.append([i, -i])
    view = ring.view()
    assert len(ring) == 4 and ring.written == 10
    assert view[:, 0].tolist() == [6, 7, 8, 9]
    assert view.base is not None  # a view into the preallocated block, not a copy
    assert ring.column("b").tolist() == [-6, -7, -8, -9]
    with pytest.raises(ValueError):
        view[0, 0] = 1  # read-only


def test_ring_buffer_clear_forgets_everything():
    ring = RingBuffer(3, ["a"])
    ring.append([1])
    ring.clear()
    assert len(ring) == 0 and ring.last() is None


# ---- telemetry rows -------------------------------------------------------------------------

def test_unmeasured_values_become_nan_gaps_never_zero():
    row = dict(zip(COLUMNS, row_values(metrics_getter(token(1)), x=7, turn=2), strict=True))
    assert row["x"] == 7 and row["turn"] == 2
    assert row["wall_ms"] == 20.0 and row["stack_compute"] == 20.0
    for name in ("io_ms", "mgmt_ms", "read_mib", "read_mib_s", "cache_hit_pct", "stack_io"):
        assert math.isnan(row[name]), name
    assert row["cpu_cores"] == pytest.approx(1.5)


def test_streaming_fields_fill_the_stack_when_measured():
    m = token(1, io_ms=5.0, mgmt_ms=1.0, read_bytes=4 * 1024 * 1024, cache_hit_pct=80.0,
              compute_ms=14.0)
    row = dict(zip(COLUMNS, row_values(metrics_getter(m), 0, 0), strict=True))
    assert (row["stack_compute"], row["stack_io"], row["stack_mgmt"]) == (14.0, 19.0, 20.0)
    assert row["read_mib"] == 4.0 and row["read_mib_s"] == pytest.approx(800.0)


def test_stored_rows_read_the_same_as_live_metrics():
    from dataclasses import asdict

    live = row_values(metrics_getter(token(3)), 1, 0)
    stored = row_values(metrics_getter(asdict(token(3))), 1, 0)
    assert np.array_equal(np.array(live), np.array(stored), equal_nan=True)


def test_readout_names_the_token_and_marks_gaps():
    ring = RingBuffer(2, COLUMNS)
    ring.append(row_values(metrics_getter(token(1)), 41, 3))
    text = readout(ring.last(), ring.index)
    assert text.startswith("token 41 (turn 3)") and "wall 20.0 ms" in text and "hit –" in text


def test_live_rate_uses_engine_time_only():
    tracker = HeadlineTracker()
    for i in range(4):
        tracker.on_token(token(i + 1, wall_ms=9.5, loop_overhead_ms=0.5))
    assert tracker.value.tok_s == pytest.approx(100.0)
    assert tracker.value.cache_budget_mib == UNMEASURED


# ---- context and stats ----------------------------------------------------------------------

@dataclass
class Msg:
    role: str
    content: str
    status: str = "complete"
    reasoning: str = ""


def test_model_history_keeps_only_complete_pairs():
    path = [Msg("user", "a"), Msg("assistant", "A", reasoning="r"),
            Msg("user", "b"), Msg("assistant", "partial", "stopped"),
            Msg("user", "c"), Msg("assistant", "C")]
    assert model_history(path) == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "A", "reasoning_content": "r"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "C"},
    ]
    assert "not part of the model's context" in status_note("stopped")
    assert status_note("complete") == ""


def test_stats_leave_out_what_was_not_measured():
    summary = RunSummary(turn=0, n_generated=10, gen_seconds=0.5, n_prompt=20, n_reused=5,
                         n_past=35, n_ctx=512, load_seconds=1.0, prefill_seconds=0.1,
                         ttft_seconds=0.12, majflt_per_token=0.0, cpu_s_per_token=0.01,
                         loop_overhead_s_per_token=0.001, stop_reason="eos")
    stats = stats_from_result(GenerateResult(ok=True, stop_reason=StopReason.EOS,
                                             summary=summary), think_s=2.0, n_think=4)
    assert stats.tok_s == 20.0 and stats.n_reused == 5 and stats.stop_reason == "eos"
    assert stats.gen_s == 0.5  # kept, so a Continue can rate the whole answer
    assert stats.cache_hit_pct is None and "cache_hit_pct" not in stats.to_json()
    assert thought_label(stats, live=False) == "Thought for 2.0 s"
    rejected = stats_from_result(GenerateResult(ok=False, stop_reason=StopReason.REJECTED))
    assert rejected.to_json() == {"stop_reason": "rejected"}


def test_recorder_counts_thinking_and_throttles_saves():
    clock = [0.0]
    rec = TurnRecorder(now=lambda: clock[0])
    for i, (answer, reasoning) in enumerate([("", "hm"), ("", "hmm"), ("4", "hmm"),
                                             ("42", "hmm")]):
        rec.on_token(TokenEvent(token(i + 1, answer, reasoning), "", "", False))
    assert rec.thinking_tokens == 2
    assert rec.thinking_seconds() == pytest.approx(2 * 20.5 / 1e3)
    assert rec.pieces == ["p1", "p2", "p3", "p4"]
    assert not rec.due_write()
    clock[0] = 1.0
    assert rec.due_write() and not rec.due_write()


def test_follow_range_grows_then_pages_in_steps():
    from workbench.ui.telemetry.view_range import follow_x_range, nice_ceiling

    assert follow_x_range(0, 10) == (-0.5, 127.5)
    assert follow_x_range(0, 70) == (-0.5, 191.5)
    ranges = {follow_x_range(0, last) for last in range(192, 256)}
    assert ranges == {(63.5, 319.5)}  # 64 tokens without moving the axis
    lo, hi = follow_x_range(0, 1000)
    assert lo < 1000 < hi and hi - lo == 256
    assert [nice_ceiling(v) for v in (0.0, 0.3, 1.0, 1.2, 37.0, 501.0)] == [
        1.0, 0.5, 1.0, 2.0, 50.0, 1000.0]


def test_event_pipe_batches_wakeups_and_keeps_order():
    import asyncio
    import threading

    from workbench.ui.event_pipe import EventPipe

    async def main() -> list[list[int]]:
        pipe: EventPipe[int] = EventPipe(asyncio.get_running_loop())
        worker = threading.Thread(target=lambda: [pipe.push(i) for i in range(500)])
        worker.start()
        worker.join()  # all pushed before the loop looks: one wake-up, one batch
        batches = [await pipe.get_batch()]
        pipe.push(500)
        batches.append(await pipe.get_batch())
        return batches

    batches = asyncio.run(main())
    assert batches == [list(range(500)), [500]]


def test_a_polled_event_pipe_gathers_a_stream_into_one_batch():
    import asyncio
    import threading
    import time

    from workbench.ui.event_pipe import EventPipe

    async def main() -> list[list[int]]:
        pipe: EventPipe[int] = EventPipe(asyncio.get_running_loop(), poll_s=1.0)

        def stream() -> None:
            pipe.push(0)  # no wake-up: the loop looks once a second
            time.sleep(0.02)
            for i in range(1, 10):
                pipe.push(i)

        worker = threading.Thread(target=stream)
        worker.start()
        batch = await pipe.get_batch()
        worker.join()
        return [batch]

    assert asyncio.run(main()) == [list(range(10))]


def test_axis_units_titles_and_ceilings():
    import numpy as np

    from workbench.ui.telemetry.series import PLOTS, axis_unit, plot_title, read_terms
    from workbench.ui.telemetry.view_range import y_ceiling

    assert axis_unit("MiB", 1000.0) == ("MiB", 1.0)
    assert axis_unit("MiB", 2000.0) == ("GiB", 1 / 1024)
    assert axis_unit("MiB/s", 5000.0) == ("GiB/s", 1 / 1024)
    assert axis_unit("ms", 20_000.0) == ("ms", 1.0)
    hit = next(p for p in PLOTS if p.key == "hit")
    assert y_ceiling([np.array([99.0])], cap=hit.y_max) == 100.0
    assert y_ceiling([np.array([99.0])]) == 200.0  # what the cap prevents
    assert y_ceiling([np.array([np.nan])], cap=100.0) == 1.0
    read = next(p for p in PLOTS if p.key == "read")
    assert plot_title(read, o_direct=True) == "Flash read / token (MiB)"
    assert plot_title(read, o_direct=False) == "Read (page cache) / token (MiB)"
    assert plot_title(next(p for p in PLOTS if p.key == "mem"), False, "GiB").endswith("(GiB)")
    assert plot_title(next(p for p in PLOTS if p.key == "faults"), False) == \
        "Major page faults per token"
    for o_direct in (True, False):
        words = " ".join(read_terms(o_direct).values()).lower()
        assert ("flash" in words) == o_direct


def test_the_drop_rate_is_a_share_of_the_token_routings_and_a_gap_while_dropping_is_off():
    def row(**fields):
        return dict(zip(COLUMNS, row_values(fields.get, 1, 0), strict=True))

    assert row(experts_routed=40, experts_dropped=10)["drop_pct"] == 25.0
    assert math.isnan(row(experts_routed=-1, experts_dropped=-1)["drop_pct"])
