"""The decode loop reads memory on a timer, not per token (engine/probes.py, issue 38)."""

from __future__ import annotations

from workbench.engine.probes import MEMORY_PERIOD_NS, MemoryProbe


def test_memory_is_read_again_only_when_the_last_sample_is_a_period_old() -> None:
    probe = MemoryProbe()
    try:
        ms = 1_000_000
        first = probe.sample_due(0)
        assert probe.reads == 1
        # Tokens every 9 ms (110 tok/s): the 20 ms period reads on every third token.
        for t in range(9 * ms, 100 * ms, 9 * ms):
            probe.sample_due(t)
        assert 20 * ms == MEMORY_PERIOD_NS
        assert probe.reads == 4  # at 0, 27, 54 and 81 ms
        assert probe.sample_due(99 * ms) is not first  # a later sample, a fresh figure
        assert first.rss_mib > 0  # a real /proc read, never the unmeasured sentinel
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
