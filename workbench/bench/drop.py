"""`bench drop`: cache-aware expert dropping against no dropping, under a memory balloon.

Both arms stream the bench-size synthetic MoE with the automatic cache while a balloon holds the
machine's available RAM near `leave_mib` (about a third of the model by default), each run from
a cold page cache, in alternating order (ABAB, BABA...), repeated. Figures, as paired ratios with
95 % bootstrap intervals over the repeats:

- tok/s of drop `frac` over off (tokens / sum of decode wall);
- expert MiB read per generated token, drop over off;
- router weight mass dropped and the share of routings dropped (the engine's counters);
- greedy-token agreement with the undropped run: the share of the positions whose token is the
  same, and the length of the common prefix (dropping is lossy: one changed token changes all
  that follows, so the prefix says when the text first diverged);
- the replay's predicted reads avoided (the off arm's route trace replayed with the drop policy
  at the off arm's budget) against the reads avoided the engine measured on the same prompt.

The drop setting is `drop_cold_frac`; a build without it says so and measures nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.bench.balloon import Balloon
from workbench.bench.matrix import drop_page_cache
from workbench.bench.stats import Interval, paired_ratio_ci
from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.replay import lookups, replay_drop, replay_lru

MIB = 1 << 20
PROMPT = "Explain, step by step, how a cache decides what to keep and what to throw away."
DROP_SETTING = "drop_cold_frac"
Log = Callable[[str], None]


def has_drop_setting() -> bool:
    return DROP_SETTING in {f.name for f in dataclasses.fields(Config)}


@dataclass(slots=True)
class DropRun:
    """One generation of one arm."""

    wall_ms: list[float]
    tokens: list[int]
    read_bytes: int
    budget_bytes: int
    routed: int = -1
    dropped: int = -1
    mass_dropped_pct: float = math.nan
    predicted_avoided_pct: float = math.nan  # the off arm only: replay of its own routing

    @property
    def seconds(self) -> float:
        return sum(self.wall_ms) / 1e3

    @property
    def s_per_token(self) -> float:
        return self.seconds / len(self.wall_ms) if self.wall_ms else math.nan

    @property
    def bytes_per_token(self) -> float:
        return self.read_bytes / len(self.tokens) if self.tokens else math.nan


@dataclass(slots=True)
class DropReport:
    frac: float
    runs: dict[str, list[DropRun]] = field(default_factory=lambda: {"off": [], "drop": []})
    balloon_mib: float = 0.0
    note: str = ""

    def lines(self) -> list[str]:
        off, drop = self.runs["off"], self.runs["drop"]
        if not off or not drop:
            return [f"bench drop: {self.note or 'nothing measured'}"]
        # Per token, so that an arm that stops early (an end-of-text token) is still compared
        # fairly: tok/s drop/off = (s/token off) / (s/token drop).
        speed = paired_ratio_ci([r.s_per_token for r in off], [r.s_per_token for r in drop])
        reads = paired_ratio_ci([r.bytes_per_token for r in drop],
                                [r.bytes_per_token for r in off])
        agree = [agreement(a.tokens, b.tokens) for a, b in zip(off, drop, strict=True)]
        same = np.mean([a for a, _ in agree]) * 100
        prefix = int(np.min([p for _, p in agree]))
        mib_tok = {arm: sum(r.read_bytes for r in rs) / MIB / sum(len(r.tokens) for r in rs)
                   for arm, rs in self.runs.items()}
        routed = sum(r.routed for r in drop)
        dropped = sum(r.dropped for r in drop)
        share = 100.0 * dropped / routed if routed > 0 and dropped >= 0 else -1.0
        masses = [r.mass_dropped_pct for r in drop if not math.isnan(r.mass_dropped_pct)]
        mass = f"{np.mean(masses):.1f}" if masses else "unmeasured"
        measured = 100.0 * (1.0 - reads.estimate)
        predicted = [r.predicted_avoided_pct for r in off
                     if not math.isnan(r.predicted_avoided_pct)]
        pred = (f"{np.mean(predicted):.1f}" if predicted else
                "n/a (the route trace has no router weights: needs the native route recording)")
        return [
            _line(f"drop {self.frac:g} tok/s", speed, "(drop/off tok/s; goal >= 1.3 at ~1/3 of "
                  f"the model available) off_tok_s={_rate(off):.3f} drop_tok_s={_rate(drop):.3f}"),
            _line("drop read MiB/token", reads, f"(drop/off) off={mib_tok['off']:.2f} "
                  f"drop={mib_tok['drop']:.2f}"),
            f"drop routings dropped_pct={_fmt(share)} weight_mass_dropped_pct={mass} "
            "(goal <= 10)",
            f"drop greedy agreement same_token_pct={same:.1f} common_prefix_min={prefix} of "
            f"{min(len(r.tokens) for r in off)} tokens",
            f"drop reads avoided measured_pct={measured:.1f} replay_predicted_pct={pred}",
            f"drop setup balloon_mib={self.balloon_mib:.0f} cache_mib="
            f"{np.mean([r.budget_bytes for r in off]) / MIB:.0f} (sized automatically at the "
            f"first open, then held) repeats={len(off)}",
        ]


def agreement(reference: list[int], other: list[int]) -> tuple[float, int]:
    """(share of positions with the same token, length of the common prefix), over the
    reference's length (a shorter run counts its missing positions as different)."""
    n = len(reference)
    if n == 0:
        return 1.0, 0
    same = sum(1 for a, b in zip(reference, other, strict=False) if a == b)
    prefix = 0
    for a, b in zip(reference, other, strict=False):
        if a != b:
            break
        prefix += 1
    return same / n, prefix


def _fmt(value: float) -> str:
    return f"{value:.1f}" if value >= 0 else "unmeasured"


def _line(name: str, ratio: Interval, extra: str) -> str:
    return f"{name} ratio={ratio.estimate:.3f} ci95=[{ratio.low:.3f}, {ratio.high:.3f}] {extra}"


def _rate(runs: list[DropRun]) -> float:
    return sum(len(r.wall_ms) for r in runs) / sum(r.seconds for r in runs)


def _config(model: Path, threads: int, n_tokens: int, floor_mb: int, frac: float,
            cache_mb: int | None = None) -> Config:
    """`cache_mb` None: the automatic cache (the first open); otherwise that cache, fixed."""
    changes: dict[str, object] = {DROP_SETTING: frac} if frac > 0 else {}
    cache: dict[str, object] = ({"cache_auto": True} if cache_mb is None else
                                {"cache_auto": False, "cache_mb": cache_mb})
    return Config(model=str(model), chat_template=False, n_ctx=max(512, n_tokens + 128),
                  n_threads=threads, n_predict=n_tokens, moe_stream=True,
                  cache_floor_mb=floor_mb, **cache, **changes)


def _mass_dropped(summary: object) -> float:
    """The engine's router weight mass dropped (%): the summary's `drop_weight_pct`, added with
    the drop policy; NaN where this build does not report it."""
    value = getattr(summary, "drop_weight_pct", None)
    return float(value) if isinstance(value, int | float) and value >= 0 else math.nan


def run_arm(model: Path, *, frac: float, drop_frac: float, threads: int, n_tokens: int,
            floor_mb: int, cache_mb: int | None = None) -> DropRun:
    """One cold run of one arm. The off arm (`frac` 0) records its routing and replays it with
    the drop policy at `drop_frac`, at its own budget."""
    rows = []
    config = _config(model, threads, n_tokens, floor_mb, frac, cache_mb)
    with Session.open(config, record_routes=frac == 0) as s:
        result = s.generate(GenerateRequest(text=PROMPT, n_predict=n_tokens, new_chat=True),
                            on_token=lambda event: rows.append(event.metrics))
        if not result.ok:
            raise RuntimeError(result.error)
        runtime = s.streaming
        assert runtime is not None
        summary = result.summary
        run = DropRun(wall_ms=[r.wall_ms for r in rows], tokens=[r.token_id for r in rows],
                      read_bytes=sum(max(0, r.read_bytes) for r in rows),
                      budget_bytes=runtime.budget.bytes,
                      routed=summary.experts_routed, dropped=summary.experts_dropped,
                      mass_dropped_pct=_mass_dropped(summary))
        if frac == 0:
            trace = runtime.route_trace()
            loads = [(t.turn, t.load) for t in trace.loads]
            if trace.has_weights:
                base = replay_lru(lookups(loads), trace.meta.expert_bytes, run.budget_bytes)
                run.predicted_avoided_pct = replay_drop(
                    loads, trace.meta.expert_bytes, run.budget_bytes, drop_frac, base
                ).reads_avoided_pct
    return run


def drop_bench(model: Path, *, frac: float, leave_mib: int, floor_mb: int, repeats: int,
               n_tokens: int, threads: int, balloon: bool, log: Log) -> DropReport:
    report = DropReport(frac=frac)
    if not has_drop_setting():
        report.note = (f"skipped: this build has no `{DROP_SETTING}` setting (cache-aware "
                       "dropping has not landed), so there is nothing to compare")
        return report
    with Balloon(leave_mib * MIB) if balloon else contextlib.nullcontext() as held:
        report.balloon_mib = held.size / MIB if held is not None else 0.0
        log(f"drop: balloon holds {report.balloon_mib:.0f} MiB; about {leave_mib} MiB left "
            "available" if held is not None else "drop: no balloon (plumbing only)")
        # The first open sizes the cache automatically, under the balloon; every later open
        # holds that size. Sized at each open, the cache followed the memory available at that
        # moment (the off arm read 20 to 43 MiB/token across repeats on one run), so the two
        # arms of a pair compared different caches and the replay's prediction, made at the
        # off arm's budget, disagreed with the measured reads (43 vs 22 % avoided).
        pinned_mb: int | None = None
        for i in range(repeats):
            for arm in (("off", "drop") if i % 2 == 0 else ("drop", "off")):
                drop_page_cache(model)
                run = run_arm(model, frac=frac if arm == "drop" else 0.0, drop_frac=frac,
                              threads=threads, n_tokens=n_tokens, floor_mb=floor_mb,
                              cache_mb=pinned_mb)
                report.runs[arm].append(run)
                if pinned_mb is None:
                    pinned_mb = max(1, run.budget_bytes // MIB)
            off, drop = report.runs["off"][-1], report.runs["drop"][-1]
            log(f"drop {i + 1}/{repeats}: off {len(off.tokens) / off.seconds:.3f} tok/s "
                f"{off.read_bytes / MIB / max(1, len(off.tokens)):.2f} MiB/token, drop "
                f"{len(drop.tokens) / drop.seconds:.3f} tok/s "
                f"{drop.read_bytes / MIB / max(1, len(drop.tokens)):.2f} MiB/token")
    return report
