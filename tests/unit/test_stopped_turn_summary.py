"""A stopped answer's figures are defined: its tail is the decode Stop aborted, not loop
overhead (issue 39: a stopped one-token answer showed "loop overhead 1237 ms")."""

from __future__ import annotations

from workbench.engine.metrics import TokenMetrics
from workbench.engine.token_row import turn_summary


def _rows(n: int) -> list[TokenMetrics]:
    return [TokenMetrics(step=i + 1, steps=16, turn=0, wall_ms=10.0, cpu_ms=20.0, majflt=0,
                         majflt_mib=0.0, loop_overhead_ms=0.5) for i in range(n)]


def _summary(stop_reason: str, n: int, tail_ms: float):
    return turn_summary(turn=0, rows=_rows(n), stop_reason=stop_reason, n_prefilled=4,
                        n_reused=0, n_past=4 + n, n_ctx=512, load_seconds=0.0,
                        prefill_ns=1_000_000, ttft_ns=2_000_000, tail_ns=int(tail_ms * 1e6))


def test_a_stopped_one_token_answer_bills_no_aborted_decode_as_overhead() -> None:
    stopped = _summary("stopped", 1, tail_ms=1237.0)
    assert stopped.loop_overhead_s_per_token * 1e3 == 0.5  # the measured gap, nothing else
    assert stopped.n_generated == 1 and stopped.tokens_per_second > 0


def test_a_finished_answer_still_counts_its_tail() -> None:
    done = _summary("eos", 2, tail_ms=3.0)
    assert abs(done.loop_overhead_s_per_token * 1e3 - (0.5 * 2 + 3.0) / 2) < 1e-9
