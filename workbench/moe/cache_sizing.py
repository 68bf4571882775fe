"""The cache-sizing curves: hit rate and reads per token against the expert cache's size.

Qt-free (the window's view and `replay --plot` draw these; tests read them directly). The
numbers come from `moe.replay` on recorded routing: the engine's LRU, its other eviction policies
(lfru, layer) and Belady's optimum, at evenly spaced budgets up to every expert of the model, plus
the budget in force.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from workbench.moe.cache_policies import add_policy_rows
from workbench.moe.replay import MIB, ReplayReport, default_budgets, lookups, replay
from workbench.moe.route_trace import TraceMeta
from workbench.moe.routes import RouteLoad

POINTS = 12  # budgets on a curve besides the current one


@dataclass(frozen=True, slots=True)
class SizingCurves:
    """One curve point per budget, ascending. Hit rates are of generated tokens (decode)."""

    budget_mib: np.ndarray
    lru_hit_pct: np.ndarray
    belady_hit_pct: np.ndarray
    lru_mib_per_token: np.ndarray
    belady_mib_per_token: np.ndarray
    current_mib: float  # the budget in force; -1 without a cache
    cliff_mib: float  # one generated token's experts; -1 with no generated token
    total_mib: float  # every expert of the model
    tokens: int  # generated tokens the curves are computed from
    # The engine's other eviction policies (lfru, layer), hit % while generating, per budget.
    policy_hit_pct: dict[str, np.ndarray] = field(default_factory=dict)

    def reads_at(self, budget_mib: float) -> tuple[float, float]:
        """(LRU, Belady) MiB read per generated token at a budget, interpolated; -1 if empty."""
        if not len(self.budget_mib):
            return -1.0, -1.0
        return (float(np.interp(budget_mib, self.budget_mib, self.lru_mib_per_token)),
                float(np.interp(budget_mib, self.budget_mib, self.belady_mib_per_token)))

    def hit_at(self, budget_mib: float) -> tuple[float, float]:
        if not len(self.budget_mib):
            return -1.0, -1.0
        return (float(np.interp(budget_mib, self.budget_mib, self.lru_hit_pct)),
                float(np.interp(budget_mib, self.budget_mib, self.belady_hit_pct)))


def curves_from_report(report: ReplayReport, current_bytes: int) -> SizingCurves:
    rows = report.budgets

    def col(get: Callable[[object], float]) -> np.ndarray:
        return np.array([get(r) for r in rows], dtype=np.float64)

    return SizingCurves(
        budget_mib=col(lambda r: r.lru.budget_bytes / MIB),
        lru_hit_pct=col(lambda r: r.lru.decode_hit_pct),
        belady_hit_pct=col(lambda r: r.belady.decode_hit_pct),
        lru_mib_per_token=col(lambda r: r.lru.decode_mib_per_token),
        belady_mib_per_token=col(lambda r: r.belady.decode_mib_per_token),
        current_mib=current_bytes / MIB if current_bytes >= 0 else -1.0,
        cliff_mib=report.token_demand_bytes / MIB if report.token_demand_bytes >= 0 else -1.0,
        total_mib=report.total_expert_bytes / MIB,
        tokens=report.decode_tokens,
        policy_hit_pct={name: col(lambda r, n=name: r.policies[n].decode_hit_pct)
                        for name in (rows[0].policies if rows else {})},
    )


def compute_curves(loads: Sequence[tuple[int, RouteLoad]], meta: TraceMeta,
                   points: int = POINTS, cancelled: Callable[[], bool] | None = None
                   ) -> SizingCurves:
    """The curves of recorded routing (pure Python: call it off the UI thread)."""
    total = sum(b * meta.n_expert for b in meta.expert_bytes.values())
    budgets = default_budgets(total, meta.cache_budget_bytes, points)
    report = replay(loads, meta.expert_bytes, meta.n_expert, meta.n_expert_used, budgets,
                    what_ifs=False, cancelled=cancelled, preloaded=meta.preloaded)
    if cancelled is None or not cancelled():
        add_policy_rows(report, lookups(loads), meta.expert_bytes, meta.preloaded)
    return curves_from_report(report, meta.cache_budget_bytes)
