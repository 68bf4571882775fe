"""`bench overhead`'s last line: the loop's gap and the decodes' own time, per token and arm."""

from __future__ import annotations

from workbench.bench.overhead import ArmTiming, OverheadReport
from workbench.bench.stats import Interval


def _figures(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split() if "=" in part)


def test_the_last_line_splits_each_arms_time_into_gap_and_decode():
    report = OverheadReport(
        engine=[ArmTiming(100, 2.0, 0.05), ArmTiming(100, 2.2, 0.05)],
        raw=[ArmTiming(100, 2.0, 0.02), ArmTiming(100, 2.0, 0.02)],
        ratio=Interval(0.95, 0.9, 1.0))
    figures = _figures(report.last_line())
    assert float(figures["engine_loop_ms_per_token"]) == 0.5
    assert float(figures["raw_loop_ms_per_token"]) == 0.2
    # (4.2 s - 0.1 s) over 200 tokens, and (4.0 s - 0.04 s) over 200.
    assert float(figures["engine_decode_ms_per_token"]) == 20.5
    assert float(figures["raw_decode_ms_per_token"]) == 19.8
