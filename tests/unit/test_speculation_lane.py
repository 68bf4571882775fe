"""The speculation lane of the live plots: drafted and kept per decode, a gap while it is off."""

from __future__ import annotations

import math

from workbench.engine.metrics import TokenMetrics
from workbench.ui.telemetry.series import COLUMNS, PLOTS, metrics_getter, row_values


def _row(**changes: object) -> dict[str, float]:
    m = TokenMetrics(step=1, steps=8, turn=0, wall_ms=5.0, cpu_ms=5.0, majflt=0, majflt_mib=0.0,
                     loop_overhead_ms=0.1)
    for k, v in changes.items():
        setattr(m, k, v)
    return dict(zip(COLUMNS, row_values(metrics_getter(m), 1, 0), strict=True))


def test_a_verify_step_plots_its_drafted_and_kept_tokens() -> None:
    v = _row(draft_len=6, draft_kept=4, drafted=1, mtp_batch=5)
    assert (v["spec_drafted"], v["spec_kept"]) == (6.0, 4.0)


def test_speculation_off_is_a_gap_not_a_zero() -> None:
    v = _row()  # the record's defaults: -1, speculation off
    assert math.isnan(v["spec_drafted"]) and math.isnan(v["spec_kept"])
    plain = _row(draft_len=0, draft_kept=0, drafted=0)  # a plain decode while speculating
    assert (plain["spec_drafted"], plain["spec_kept"]) == (0.0, 0.0)


def test_the_lane_is_one_of_the_windows_plots() -> None:
    (lane,) = [p for p in PLOTS if p.key == "spec"]
    assert {c.column for c in lane.curves} == {"spec_drafted", "spec_kept"}
    assert lane.unit == "tokens"
