"""Ctrl-C belongs to the main thread: the engine thread (and every thread llama.cpp or the
streamer starts from it, which inherit its mask) blocks SIGINT, so the kernel always hands the
signal to the main thread, where it interrupts the prompt's read or a wait on the engine."""

from __future__ import annotations

import signal
import threading

import pytest

from workbench.engine.engine_thread import EngineThread

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX only")


def _blocked() -> set[signal.Signals]:
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


def test_the_engine_thread_and_its_children_block_sigint_and_main_does_not():
    engine = EngineThread("signals")
    try:
        assert signal.SIGINT in engine.call(_blocked)
        child: list[set[signal.Signals]] = []

        def start_child() -> None:  # as llama.cpp starts its pool from the engine thread
            t = threading.Thread(target=lambda: child.append(_blocked()))
            t.start()
            t.join()

        engine.call(start_child)
        assert signal.SIGINT in child[0]
    finally:
        engine.stop()
    assert signal.SIGINT not in _blocked()  # the main thread still takes Ctrl-C
