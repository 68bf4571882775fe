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


def drop_budget_problem(frac: float, budget: CacheBudget, token_demand_bytes: int) -> str:
    """Why dropping cannot run on this cache ("" when it can).

    Dropping skips cold experts: ones the cache misses. A cache smaller than one token's expert
    demand hits (almost) nothing, so every routed expert is "cold" and the policy degenerates
    into the unconditional weight cut it exists to avoid. Checked at open (and on a resize),
    when the model's expert sizes and the budget automatic sizing chose are known.
    """
    if frac <= 0 or token_demand_bytes <= 0:
        return ""
    if budget.enabled and budget.bytes >= token_demand_bytes:
        return ""
    need_mib = -(-token_demand_bytes // MIB)  # whole MiB, rounded up: what --cache-mb takes
    have = (f"the expert cache is {budget.bytes / MIB:.1f} MiB ({budget.explanation})"
            if budget.enabled else "there is no expert cache")
    fix = ("give automatic sizing more room (a lower --cache-floor-mb or a higher "
           "--cache-ceil-mb) or set --cache-mb" if budget.auto else "set --cache-mb")
    return (f"dropping cold experts (drop_cold_frac={frac:g}) needs an expert cache of at least "
            f"one token's expert demand, {token_demand_bytes / MIB:.1f} MiB for this model, but "
            f"{have}: every routed expert would miss and dropping would cut low-weight experts "
            f"unconditionally. {fix[0].upper() + fix[1:]} to {need_mib} MiB or more, or set "
            "--drop-cold-experts 0")


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
