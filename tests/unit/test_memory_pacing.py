"""The decode loop reads memory on a timer, not per token (engine/probes.py, issue 38)."""

from __future__ import annotations

import resource
import time

from workbench.engine.probes import MEMORY_PERIOD_NS, MemoryProbe, counters


def test_memory_is_read_again_only_when_the_last_sample_is_a_period_old() -> None:
    probe = MemoryProbe()
    try:
        ms = 1_000_000
        first = probe.sample_due(0)
        assert probe.reads == 1
        # Tokens every 9 ms (110 tok/s): the 200 ms period reads on every 23rd token.
        for t in range(9 * ms, 600 * ms, 9 * ms):
            probe.sample_due(t)
        assert 200 * ms == MEMORY_PERIOD_NS
        assert probe.reads == 3  # at 0, 207 and 414 ms
        assert probe.sample_due(621 * ms) is not first  # a later sample, a fresh figure
        assert first.rss_mib > 0  # a real /proc read, never the unmeasured sentinel
    finally:
        probe.close()


def test_a_token_that_faulted_reads_memory_afresh_within_the_period() -> None:
    """After a decode with major faults the loop asks for a fresh sample: the stall explanation
    of that token compares its resident set with the token before (tests/engine/test_stall_runs)."""
    probe = MemoryProbe()
    try:
        first = probe.sample_due(0)
        assert probe.sample_due(1_000_000) is first  # 1 ms later: the same sample
        assert probe.sample_due(2_000_000, fresh=True) is not first
        assert probe.reads == 2
    finally:
        probe.close()


def test_a_zero_period_reads_every_token() -> None:
    probe = MemoryProbe(period_ns=0)
    try:
        for t in range(5):
            probe.sample_due(t)
        assert probe.reads == 5
    finally:
        probe.close()


def test_counters_read_the_process_cpu_clock_and_the_fault_count() -> None:
    """counters() takes both from one getrusage: its CPU time is the process CPU clock's
    (user + system of every thread), to the microsecond, and its faults getrusage's own."""
    start, clock0 = counters(), time.process_time_ns()
    spin_until = time.process_time_ns() + 30_000_000
    while time.process_time_ns() < spin_until:  # 30 ms of CPU on this thread
        pass
    end, clock1 = counters(), time.process_time_ns()
    measured = end.cpu_ns - start.cpu_ns
    assert measured >= 29_000_000
    assert abs(measured - (clock1 - clock0)) < 1_000_000  # the same clock, read a moment apart
    assert end.cpu_ns % 1000 == 0  # microseconds, as getrusage gives them
    assert end.majflt == resource.getrusage(resource.RUSAGE_SELF).ru_majflt
