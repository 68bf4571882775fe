"""`bench policy`: the expert cache's eviction policies, prefetch, and cache-off bandwidth,
measured side by side on the bench model (issue 24).

1. policies: at each budget (200 and 800 MiB by default) one streamed session per policy (lru,
   lfru, layer), all open at once, warm start off (so each run's cache is the policy's own doing),
   one warm-up answer each, then `repeats` answers each in rotating order (ABC, CBA, ...). The
   best non-LRU policy is the one with the highest tok/s at the first budget; printed as a paired
   ratio over the repeats against LRU, with each arm's hit rate over the measured runs.
   Belady's hit rate is the replay's: one run of the same prompt is recorded (a session of its
   own, outside the timed arms: recording isolates more graph nodes) and replayed over the very
   sequence the arms' caches saw (the warm-up answer and then the repeats, greedy decoding routes
   the same every time). The same replay plays every policy, and its hit rate is printed beside
   the engine's: the independent count.
2. prefetch: the best policy with and without prefetch at the first budget, interleaved.
3. io: the cache off against a standalone O_DIRECT reader of the same byte ranges (bench
   stream's io arm, `stream.io_efficiency`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.bench.engine import close_session, on_engine, open_session
from workbench.bench.stats import Interval, paired_ratio_ci
from workbench.bench.stream import (
    PROMPT,
    ArmRun,
    _config,
    _generate,
    _rate,
    decode_lookups,
    io_efficiency,
)
from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.cache_policies import POLICIES, replay_policy
from workbench.moe.replay import Lookup, belady_hits, lookups

MIB = 1 << 20
Log = Callable[[str], None]
__all__ = ["PolicyArm", "decode_lookups", "policy_bench"]


@dataclass(slots=True)
class PolicyArm:
    name: str
    config: Config
    runs: list[ArmRun] = field(default_factory=list)
    hits: int = 0
    lookups: int = 0
    stats: object | None = None

    @property
    def hit_pct(self) -> float:
        return 100.0 * self.hits / self.lookups if self.lookups else -1.0

    @property
    def seconds(self) -> list[float]:
        return [r.seconds for r in self.runs]


def _counts(session: Session) -> tuple[int, int]:
    c = on_engine(lambda: session.streaming.streamer.counters())
    return c.hits, c.lookups


def _interleaved(arms: list[PolicyArm], *, repeats: int, n_tokens: int, log: Log,
                 label: str) -> None:
    """Open every arm, one warm-up answer each, then `repeats` answers each, rotating."""
    sessions = [open_session(arm.config, warm_dir=None) for arm in arms]
    try:
        for s in sessions:
            _generate(s, n_tokens)  # warm-up: the cache fills under the arm's policy
        start = [_counts(s) for s in sessions]
        order = list(range(len(arms)))
        for i in range(repeats):
            for j in (order if i % 2 == 0 else order[::-1]):
                arms[j].runs.append(_generate(sessions[j], n_tokens))
            log(f"{label} {i + 1}/{repeats}: " + ", ".join(
                f"{a.name} {a.runs[-1].tok_s:.2f} tok/s" for a in arms))
        for arm, s, (h0, l0) in zip(arms, sessions, start, strict=True):
            h, lk = _counts(s)
            arm.hits, arm.lookups = h - h0, lk - l0
            arm.stats = on_engine(lambda s=s: s.streaming.streamer.cache_stats())
    finally:
        for s in sessions:
            close_session(s)


def _recorded_turn(config: Config, n_tokens: int) -> tuple[list[Lookup], dict[int, int]]:
    """One answer of PROMPT with its routing recorded (prefill and decode), as the cache saw it."""
    def run() -> tuple[list[Lookup], dict[int, int]]:
        with Session.open(config, record_routes=True) as s:
            s.generate(GenerateRequest(text=PROMPT, n_predict=n_tokens, new_chat=True))
            loads = s.streaming.routes.loads()
            return lookups(loads), dict(s.streaming.expert_bytes)
    return on_engine(run)


def replayed_hits(turn: list[Lookup], expert_bytes: dict[int, int], budget: int, repeats: int,
                  ) -> dict[str, float]:
    """Hit % over the measured answers (after one warm-up) of each policy and of Belady, replayed
    over the sequence the arms' caches saw: the same answer 1 + repeats times."""
    seq_all = turn * (1 + repeats)
    out: dict[str, float] = {}
    for policy in POLICIES:
        whole = replay_policy(seq_all, expert_bytes, budget, policy)
        warm = replay_policy(turn, expert_bytes, budget, policy)  # online: the same prefix
        n = whole.lookups - warm.lookups
        out[policy] = 100.0 * (whole.hits - warm.hits) / n if n else -1.0
    measured = list(belady_hits(seq_all, expert_bytes, budget))[len(turn):]
    n = sum(len(lk.experts) for lk in seq_all[len(turn):])
    out["belady"] = 100.0 * sum(measured) / n if n else -1.0
    return out


def _line(name: str, ratio: Interval, extra: str) -> str:
    return f"{name} tok/s={ratio.estimate:.3f} [{ratio.low:.3f}, {ratio.high:.3f}] {extra}"


def policy_bench(model: Path, *, budgets_mib: tuple[int, ...], repeats: int, n_tokens: int,
                 threads: int, lanes: int, log: Log, prefetch: bool = True, io: bool = True
                 ) -> list[str]:
    lines: list[str] = []
    best = ""
    for n, budget_mib in enumerate(budgets_mib):
        budget = budget_mib * MIB
        base = _config(model, threads, n_tokens, moe_stream=True, cache_mb=budget_mib,
                       io_threads=lanes)
        arms = [PolicyArm(p, base.replace(cache_policy=p)) for p in POLICIES]
        _interleaved(arms, repeats=repeats, n_tokens=n_tokens, log=log,
                     label=f"policy {budget_mib} MiB")
        turn, expert_bytes = _recorded_turn(base, n_tokens)
        replayed = replayed_hits(turn, expert_bytes, budget, repeats)
        by_name = {a.name: a for a in arms}
        lru = by_name["lru"]
        if n == 0:
            best = max((a for a in arms if a.name != "lru"), key=lambda a: _rate(a.runs)).name
        chosen = by_name[best]
        ratio = paired_ratio_ci(lru.seconds, chosen.seconds)
        rates = " ".join(f"{a.name}_tok_s={_rate(a.runs):.2f}" for a in arms)
        engine_vs_replay = " ".join(
            f"{a.name}_hit_engine={a.hit_pct:.1f}/replay={replayed[a.name]:.1f}" for a in arms)
        lines.append(_line(
            f"policy ratio best/lru @{budget_mib}MiB", ratio,
            f"hit best={chosen.hit_pct:.1f} lru={lru.hit_pct:.1f} "
            f"belady={replayed['belady']:.1f} (best={best}; {rates}; {engine_vs_replay}; "
            f"{repeats} x {n_tokens} tokens, hit % of every lookup of the measured answers)"))
        for line in lines[-1:]:
            log(line)
    if prefetch and best:
        budget_mib = budgets_mib[0]
        base = _config(model, threads, n_tokens, moe_stream=True, cache_mb=budget_mib,
                       io_threads=lanes, cache_policy=best)
        arms = [PolicyArm("off", base), PolicyArm("on", base.replace(prefetch=True))]
        _interleaved(arms, repeats=repeats, n_tokens=n_tokens, log=log,
                     label=f"prefetch {budget_mib} MiB")
        off, on = arms
        ratio = paired_ratio_ci(off.seconds, on.seconds)
        st = on.stats
        # Stall saved: the reads the prefetch hits spared the eval thread, at the off arm's own
        # demand-read bandwidth (bytes read / time waited for them), less the time it waited
        # for prefetches still in flight. Over the measured runs' share of the counters.
        off_bytes = sum(r.read_bytes for r in off.runs)
        off_io_s = sum(r.io_ms for r in off.runs) / 1e3
        bandwidth = off_bytes / off_io_s if off_io_s > 0 else 0.0
        saved_ms = (1e3 * st.prefetch_hit_bytes / bandwidth - st.prefetch_wait_ns / 1e6
                    if bandwidth > 0 else -1.0)
        lines.append(_line(
            f"prefetch ratio on/off @{budget_mib}MiB ({best})", ratio,
            f"hit on={on.hit_pct:.1f} off={off.hit_pct:.1f} "
            f"prefetch_issued={st.prefetch_issued} prefetch_hits={st.prefetch_hits} "
            f"wasted_mib={st.prefetch_wasted_bytes / MIB:.1f} "
            f"wait_ms={st.prefetch_wait_ns / 1e6:.1f} "
            f"hit_mib={st.prefetch_hit_bytes / MIB:.1f} "
            f"read_ms={st.prefetch_read_ns / 1e6:.1f} stall_saved_ms={saved_ms:.1f} "
            "(counters over warm-up and repeats; stall saved = hit bytes at the off arm's "
            "read bandwidth - wait)"))
        log(lines[-1])
    if io:
        lines.append(io_efficiency(model, lanes=lanes, repeats=repeats, n_tokens=n_tokens,
                                   threads=threads, log=log))
    return lines
