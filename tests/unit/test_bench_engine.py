"""Bench work inside another program's process runs on an engine thread that ends with it
(bench/engine.py: a thread that stays keeps a second OpenMP team, which slows the program's own
decodes for as long as it lives)."""

from __future__ import annotations

import threading

from workbench.bench.engine import engine, engine_that_ends, on_engine


def test_work_in_the_block_runs_on_a_thread_that_ends_with_it() -> None:
    process_engine = on_engine(threading.current_thread)
    with engine_that_ends("test-engine") as block_engine:
        inside = on_engine(threading.current_thread)
        assert inside is not process_engine and inside is not threading.current_thread()
        assert engine() is block_engine and inside.name == "test-engine"
    assert not inside.is_alive()
    assert on_engine(threading.current_thread) is process_engine  # outside: the process's


def test_overlapping_blocks_share_one_thread_which_ends_with_the_last() -> None:
    with engine_that_ends("first"):
        first = on_engine(threading.current_thread)
        with engine_that_ends("second"):
            assert on_engine(threading.current_thread) is first
        assert first.is_alive()  # the first block still runs on it
    assert not first.is_alive()


def test_a_block_whose_work_raises_still_ends_its_thread() -> None:
    try:
        with engine_that_ends():
            worker = on_engine(threading.current_thread)
            on_engine(lambda: 1 / 0)
    except ZeroDivisionError:
        pass
    assert not worker.is_alive()


def test_the_window_s_bench_matrix_runs_on_a_thread_that_ends(monkeypatch) -> None:
    from workbench.ui.runs import qt_matrix_dialog

    # The matrix's own work is replaced by a look at the thread it would run its sessions on.
    monkeypatch.setattr(qt_matrix_dialog, "run_matrix",
                        lambda plan, progress: on_engine(threading.current_thread))
    matrix_engine = qt_matrix_dialog._run_here(None, lambda *_: None)
    assert matrix_engine.name == "matrix-engine" and not matrix_engine.is_alive()
