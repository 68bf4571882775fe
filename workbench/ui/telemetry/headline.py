"""The headline numbers above the plots, computed from engine timings only (Qt-free).

Live tok/s is tokens over their engine time (decode wall + loop overhead) across the last few
tokens, never a count of UI updates: a UI that lags must not make the model look slow.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from workbench.engine.metrics import RunSummary
from workbench.engine.summary_labels import PREFILL_RATE, RATE, TTFT

RECENT = 16  # tokens in the live rate's window


@dataclass(slots=True)
class Headline:
    tok_s: float = -1.0
    ttft_s: float = -1.0
    prefill_tok_s: float = -1.0
    loop_overhead_ms: float = -1.0
    cache_resident_mib: float = -1.0
    cache_budget_mib: float = -1.0

    def items(self) -> list[tuple[str, str]]:
        def num(value: float, fmt: str) -> str:
            return "–" if value < 0 else fmt.format(value)

        cache = "–"
        if self.cache_budget_mib >= 0:
            cache = f"{num(self.cache_resident_mib, '{:.0f}')} / {self.cache_budget_mib:.0f} MiB"
        return [
            (RATE.unit, num(self.tok_s, "{:.1f}")),
            (TTFT.label, num(self.ttft_s, "{:.2f} " + TTFT.unit)),
            (PREFILL_RATE.label, num(self.prefill_tok_s, "{:.0f} " + PREFILL_RATE.unit)),
            ("loop overhead", num(self.loop_overhead_ms, "{:.2f} ms")),
            ("cache resident / budget", cache),
        ]


class HeadlineTracker:
    def __init__(self) -> None:
        self._recent: deque[tuple[float, float]] = deque(maxlen=RECENT)  # (step ms, overhead)
        self.value = Headline()

    def on_token(self, metrics: Any) -> None:
        overhead = max(0.0, metrics.loop_overhead_ms)
        self._recent.append((metrics.wall_ms + overhead, overhead))
        total_ms = sum(step for step, _ in self._recent)
        if total_ms > 0:
            self.value.tok_s = len(self._recent) * 1e3 / total_ms
        self.value.loop_overhead_ms = sum(o for _, o in self._recent) / len(self._recent)
        if metrics.cache_budget_mib >= 0:
            self.value.cache_budget_mib = metrics.cache_budget_mib

    def on_summary(self, summary: RunSummary) -> None:
        if summary.n_generated > 0:
            self.value.ttft_s = summary.ttft_seconds
        if summary.tokens_per_second >= 0:
            self.value.tok_s = summary.tokens_per_second
        if summary.prefill_tokens_per_second >= 0:
            self.value.prefill_tok_s = summary.prefill_tokens_per_second
        if summary.loop_overhead_s_per_token >= 0:
            self.value.loop_overhead_ms = summary.loop_overhead_s_per_token * 1e3
        if summary.cache_budget_mib >= 0:
            self.value.cache_budget_mib = summary.cache_budget_mib
        if summary.cache_resident_mib >= 0:
            self.value.cache_resident_mib = summary.cache_resident_mib

    def begin_turn(self) -> None:
        self._recent.clear()
