"""Sizing the expert cache: fixed, automatic (once at load), and the cliff warning."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class CacheBudget:
    bytes: int  # < 0: no cache (every routed slice is read)
    auto: bool
    explanation: str  # one line for the run info and the UI

    @property
    def enabled(self) -> bool:
        return self.bytes >= 0

    @property
    def mib(self) -> float:
        return self.bytes / MIB if self.enabled else -1.0


def resolve_budget(
    *, cache_mb: int, auto: bool, floor_mb: int, ceil_mb: int, total_expert_bytes: int,
    mem_available_bytes: int, dense_reserved_bytes: int,
) -> CacheBudget:
    """The cache budget in force for a session.

    Automatic sizing leaves `floor_mb` of the memory available free, after setting aside what
    the dense weights will take when they are read into private memory, and never exceeds the
    whole expert set (or the ceiling). A budget of 0 MiB chosen automatically still keeps an LRU
    cache (and reports 0 % hits): the user asked for a cache, and the numbers must say it fails.
    """
    if not auto:
        if cache_mb <= 0:
            return CacheBudget(-1, False, "no expert cache: every routed expert is read")
        return CacheBudget(cache_mb * MIB, False, f"fixed expert cache of {cache_mb} MiB")
    cap = total_expert_bytes if ceil_mb <= 0 else min(ceil_mb * MIB, total_expert_bytes)
    available = max(0, mem_available_bytes - dense_reserved_bytes)
    budget = max(0, min(available - floor_mb * MIB, cap))
    return CacheBudget(
        budget, True,
        f"automatic: {available / MIB:.0f} MiB available after dense weights, leaving "
        f"{floor_mb} MiB free -> {budget / MIB:.0f} MiB (cap {cap / MIB:.0f} MiB)",
    )


def cliff_warning(budget: CacheBudget, token_demand_bytes: int) -> str:
    """A warning when the cache is smaller than one token's expert demand ("" otherwise).

    LRU over a cyclic access pattern larger than the cache evicts every entry just before it is
    needed again: the hit rate falls to 0 %, while every lookup still costs management time.
    """
    if not budget.enabled or token_demand_bytes <= 0 or budget.bytes >= token_demand_bytes:
        return ""
    return (
        f"The expert cache ({budget.bytes / MIB:.1f} MiB) is smaller than one token's expert "
        f"demand ({token_demand_bytes / MIB:.1f} MiB): an LRU cache then hits almost nothing. "
        "Use a larger cache, or none. The token-cycle guard (--cache-guard) or the lfru cache "
        "policy keep part of it hitting."
    )
