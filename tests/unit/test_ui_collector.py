"""The window's collector: cycles are collected on the owning thread only, never while paused."""

from __future__ import annotations

import gc
import threading

import pytest

from workbench.ui.ui_collector import UiCollector


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collector():
    c = UiCollector()
    thresholds = gc.get_threshold()
    c.install()
    gc.set_threshold(10, 10, 10)
    yield c
    gc.set_threshold(*thresholds)
    c.uninstall()


def _make_garbage(n: int = 50) -> None:
    for _ in range(n):
        Cycle()


def test_install_turns_the_automatic_collector_off(collector):
    assert not gc.isenabled()
    collector.uninstall()
    assert gc.isenabled()
    collector.install()


def test_a_tick_collects_what_is_due_on_the_owning_thread(collector):
    gc.collect()
    _make_garbage()
    assert collector.due_generation() >= 0
    assert collector.tick() >= 0
    assert gc.get_count()[0] < 10


def test_a_tick_on_another_thread_collects_nothing(collector):
    _make_garbage()
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.append(collector.tick()))
    worker.start()
    worker.join()
    assert seen == [-1]
    assert collector.due_generation() >= 0  # still due: nothing was collected


def test_no_collection_while_paused(collector):
    _make_garbage()
    collector.pause()
    collector.pause()
    assert collector.tick() == -1
    collector.resume()
    assert collector.tick() == -1  # still paused once
    collector.resume()
    assert collector.tick() >= 0
