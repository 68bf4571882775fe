"""`bench curve`: the speed/quality curve of the lossy levers on one model, at one cache budget.

Every arm streams the model's experts through the same cache, sized to about two tokens' expert
demand (k routed experts x every MoE layer x one expert's bytes, twice): the budget at which the
levers have something to win (below one token's demand nothing hits; far above it, nothing is
read). The arms are the lossless stream (nothing dropped: the speed every lossy arm is measured
against), dropping at its rungs (0.5, 0.75, 1.0), a smaller top-k (k-1, k/2) and substitution at
its rungs (0.10 ... 0.30). Each arm is scored against the lossless reference on one text, one
token per decode (bench/quality.py), and its speed and reads are those of that same read: decode
time alone (the KL work is outside the bracket) and the expert bytes read per position. An arm is
on the Pareto front when no other arm is at least as fast with at most its KL (matrix_quality.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.bench.compare import format_interval
from workbench.bench.matrix_quality import QUALITY_HEADER, grid_lines, pareto_front, quality_cells
from workbench.bench.quality import QualityReport, read_text, score_text
from workbench.bench.stats import Interval
from workbench.config import SETTINGS, Config
from workbench.moe.layout import expert_tensors, read_model_facts

MIB = 1 << 20
DEMAND_MULTIPLE = 2.0  # the cache holds about this many tokens' expert demand
DEFAULT_CURVE_TOKENS = 128


def _rungs(name: str) -> tuple[float, ...]:
    """A lossy setting's rungs above off, as the settings panel offers them (declared once, in
    config.py)."""
    setting = next(s for s in SETTINGS if s.name == name)
    return tuple(float(v) for v, _ in setting.rungs if v)


def token_demand_bytes(model: Path) -> int:
    """One generated token's worst-case expert demand at the model's own top-k: every MoE layer
    routes k distinct experts (engine/streaming.py counts it the same way)."""
    facts = read_model_facts(model)
    per_layer: dict[int, int] = {}
    for t in expert_tensors(model):
        per_layer[t.layer] = per_layer.get(t.layer, 0) + t.expert_stride
    if not per_layer or facts.n_expert_used <= 0:
        raise ValueError(f"{model.name} has no routed experts: the curve needs a MoE model")
    return sum(b * min(facts.n_expert_used, facts.n_expert) for b in per_layer.values())


def curve_arms(model: Path) -> dict[str, dict[str, object]]:
    """The arms by name, each the lossy settings it changes (the lossless arm changes none)."""
    k = read_model_facts(model).n_expert_used
    arms: dict[str, dict[str, object]] = {"lossless": {}}
    arms |= {f"drop {f:g}": {"drop_cold_frac": f} for f in _rungs("drop_cold_frac")}
    for top_k in dict.fromkeys((k - 1, k // 2)):  # k=2 gives 1 twice: one arm
        if top_k >= 1:
            arms[f"top-k {top_k}"] = {"n_expert_used": top_k}
    arms |= {f"substitute {m:g}": {"expert_substitute": m} for m in _rungs("expert_substitute")}
    return arms


def curve_base(model: Path, *, threads: int, tokens: int) -> Config:
    """The settings every arm shares: streamed through a cache of about two tokens' demand, the
    warm start off (every arm starts from the same empty cache)."""
    cache_mb = math.ceil(DEMAND_MULTIPLE * token_demand_bytes(model) / MIB)
    return Config(model=str(model), chat_template=False, n_ctx=max(256, tokens + 64),
                  n_threads=threads, moe_stream=True, cache_mb=cache_mb, cache_auto=False,
                  cache_warm_start=False)


@dataclass(frozen=True, slots=True)
class CurvePoint:
    arm: str
    report: QualityReport
    pareto: bool

    @property
    def tok_s(self) -> Interval:
        return self.report.setting.tok_s

    @property
    def mib_per_token(self) -> float:
        """Expert bytes read per scored position; -1 when the read was not streamed."""
        f = self.report.setting.forced
        return f.read_bytes / MIB / f.n_positions if f.read_bytes >= 0 and f.n_positions else -1.0


@dataclass(frozen=True, slots=True)
class Curve:
    model: str
    cache_mb: int
    demand_mib: float
    points: list[CurvePoint]


def run_curve(model: Path, text_path: Path, *, tokens: int = DEFAULT_CURVE_TOKENS,
              threads: int = 2, log: Callable[[str], None] | None = None) -> Curve:
    """Score every arm on the text (QualityError / SessionError on failure)."""
    text = read_text(text_path)
    base = curve_base(model, threads=threads, tokens=tokens)
    arms = curve_arms(model)
    reports: dict[str, QualityReport] = {}
    for i, (name, changes) in enumerate(arms.items(), start=1):
        if log is not None:
            log(f"curve {i}/{len(arms)}: {name} ({tokens} positions of {text_path.name}, "
                f"cache {base.cache_mb} MiB)")
        reports[name] = score_text(base.replace(**changes), text, text_name=text_path.name,
                                   max_tokens=tokens)
    front = pareto_front({n: (r.setting.tok_s.estimate, r.figures.kl_mean.estimate)
                          for n, r in reports.items()})
    return Curve(model=model.name, cache_mb=base.cache_mb,
                 demand_mib=token_demand_bytes(model) / MIB,
                 points=[CurvePoint(n, r, n in front) for n, r in reports.items()])


def format_curve(curve: Curve) -> str:
    """The curve as a plain-text table; * marks the Pareto front."""
    grid = [["arm", "tok/s", "MiB read/token", *QUALITY_HEADER, "front"]]
    grid += [[p.arm, format_interval(p.tok_s),
              f"{p.mib_per_token:.2f}" if p.mib_per_token >= 0 else "-",
              *quality_cells(p.report), "*" if p.pareto else ""] for p in curve.points]
    lines = grid_lines(grid)
    n = sorted({p.report.n_scored for p in curve.points})
    text = curve.points[0].report.text_name if curve.points else "?"
    return (f"Speed/quality curve of {curve.model}: expert cache {curve.cache_mb} MiB (about "
            f"{DEMAND_MULTIPLE:g} tokens' demand of {curve.demand_mib:.1f} MiB); every arm "
            f"scored against the lossless reference on {text} ({'/'.join(map(str, n))} "
            "positions, one token per decode); tok/s over decode time alone; 95 % intervals; "
            "* on the Pareto front (no arm is both faster and closer)\n\n"
            + "\n".join(lines) + "\n")
