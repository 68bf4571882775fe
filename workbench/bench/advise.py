"""What to set for a model on this machine: stream or not, the expert cache, dropping, threads
(Qt-free; `workbench advise MODEL` prints it, the model picker offers it).

The plan is arithmetic on the model's layout (GGUF header) and the memory available now:

- the whole model, its KV cache and the memory kept free for everything else fit: load it
  whole, nothing to stream;
- else, for a MoE model whose dense part, KV cache and that reserve fit: stream the experts,
  with a cache of what is left (never more than every expert). A cache smaller than one
  token's experts hits almost nothing (moe/budget.py's cliff), so then none;
- else it does not fit, streamed or not, and the plan says by how much.

The expected hit rate comes from a routing probe (bench/advise_probe.py): a short streamed
decode's recorded routing replayed through the engine's LRU at the planned budget
(moe/replay.py), with dropping's what-ifs at that budget. Dropping is advised only where the
replay shows it avoids a real share of reads for little router weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from workbench.config import BY_NAME, Config
from workbench.engine import thread_choice, wait_policy
from workbench.moe.layout import ModelFacts
from workbench.plain_number import fixed

MIB = 1 << 20
RESERVE_MIB = Config().cache_floor_mb  # memory left to everything else, as automatic sizing does
DROP_MIN_AVOIDED_PCT = 10.0  # dropping is worth it when it avoids this share of reads...
DROP_MAX_MASS_PCT = 5.0  # ...while discarding at most this share of the router's weight


@dataclass(frozen=True, slots=True)
class Machine:
    available_mib: float  # MemAvailable now
    total_mib: float
    cores: int  # physical where known, else logical


def this_machine() -> Machine:
    import os

    import psutil

    vm = psutil.virtual_memory()
    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    return Machine(available_mib=vm.available / MIB, total_mib=vm.total / MIB, cores=cores)


@dataclass(frozen=True, slots=True)
class DropOption:
    frac: float
    reads_avoided_pct: float
    mass_dropped_pct: float  # NaN when the probe recorded no router weights


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What a routing probe's replay says at the planned budget."""

    tokens: int  # generated tokens replayed
    budget_mib: float
    lru_hit_pct: float  # decode lookups that hit, the engine's LRU
    belady_hit_pct: float  # the ceiling at this budget
    mib_per_token: float  # expert reads per generated token (LRU)
    token_demand_mib: float
    drops: tuple[DropOption, ...] = ()


@dataclass(frozen=True, slots=True)
class Layout:
    """The model's memory, by part, from its header."""

    weights_mib: float
    expert_mib: float
    dense_mib: float
    token_demand_mib: float  # one token's routed experts, every MoE layer (top-k each)
    is_moe: bool


def layout_of(facts: ModelFacts) -> Layout:
    """From the header alone. One token routes top-k experts in every MoE layer, and each
    layer holds n_expert of them: k / n_expert of all expert bytes, exactly, whatever the
    layers' sizes."""
    is_moe = facts.is_moe and facts.expert_bytes > 0
    top_k = min(facts.n_expert_used, facts.n_expert) if is_moe else 0
    demand = facts.expert_bytes * top_k / facts.n_expert if is_moe else 0.0
    return Layout(weights_mib=facts.tensor_bytes / MIB, expert_mib=facts.expert_bytes / MIB,
                  dense_mib=(facts.tensor_bytes - facts.expert_bytes) / MIB,
                  token_demand_mib=demand / MIB, is_moe=is_moe)


@dataclass(frozen=True, slots=True)
class Advice:
    verdict: str  # "fits", "stream", "does not fit"
    stream: bool
    cache_mb: int  # 0: none (every routed expert read)
    drop_cold_frac: float
    threads: int
    io_threads: int
    needed_mib: float  # what the plan needs, reserve included
    available_mib: float
    reasons: tuple[str, ...]
    probe: ProbeResult | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def settings(self) -> dict[str, object]:
        """The settings to change (by setting name), what the window applies. Streamed, the
        thread count is left to the opening's measurement (engine/opening.py): a -t here would
        be an explicit choice and skip it."""
        if not self.stream:
            return {"moe_stream": False, "n_threads": self.threads}
        out: dict[str, object] = {"moe_stream": True, "cache_mb": self.cache_mb,
                                  "cache_auto": False, "io_threads": self.io_threads}
        if self.cache_mb > 0:
            out["drop_cold_frac"] = self.drop_cold_frac
        return out

    @property
    def flags(self) -> str:
        """The same as command-line flags (each setting's own first flag)."""
        parts = []
        for name, value in self.settings.items():
            flag = BY_NAME[name].flags[0]
            if isinstance(value, bool):
                parts.append(flag if value else f"--no-{flag[2:]}")
            else:
                parts.append(f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}")
        return " ".join(parts)


def plan(layout: Layout, machine: Machine, kv_mib: float, *,
         reserve_mib: float = RESERVE_MIB) -> Advice:
    """The settings from memory alone (no probe): stream or not, and the cache budget."""
    threads = thread_choice.recommended(machine.cores)
    io_threads = BY_NAME["io_threads"].default
    whole = layout.weights_mib + kv_mib + reserve_mib
    available = machine.available_mib
    common = {"threads": threads, "io_threads": int(io_threads), "available_mib": available}
    if available < 0:
        return Advice("unknown", False, 0, 0.0, needed_mib=whole, reasons=(
            "this machine's available memory cannot be read: load it whole and watch the "
            "memory plots",), **common)
    if whole <= available:
        return Advice("fits", False, 0, 0.0, needed_mib=whole, reasons=(
            f"the whole model ({_mib(layout.weights_mib)}), its KV cache ({_mib(kv_mib)}) and "
            f"{_mib(reserve_mib)} kept free fit in the {_mib(available)} available: load it "
            "whole, no streaming",), **common)
    streamed = layout.dense_mib + kv_mib + reserve_mib
    if not layout.is_moe or streamed > available:
        why = ("it is not a Mixture-of-Experts model, so nothing can be streamed"
               if not layout.is_moe else
               f"even streamed, its dense part ({_mib(layout.dense_mib)}), KV cache "
               f"({_mib(kv_mib)}) and {_mib(reserve_mib)} kept free need {_mib(streamed)}")
        need = whole if not layout.is_moe else streamed
        return Advice("does not fit", False, 0, 0.0, needed_mib=need, reasons=(
            f"it needs {_mib(whole)} whole against {_mib(available)} available; {why}: "
            f"{_mib(need - available)} short. A shorter context or a smaller quantisation "
            "would help; as it is, the kernel will page weights from disk every token",),
            **common)
    room = available - streamed
    cache = int(room)  # below every expert's size: the whole model did not fit
    reasons = [f"the whole model ({_mib(layout.weights_mib)}) with its KV cache and "
               f"{_mib(reserve_mib)} kept free needs {_mib(whole)}, more than the "
               f"{_mib(available)} available: stream its experts",
               f"the dense part ({_mib(layout.dense_mib)}) and KV cache ({_mib(kv_mib)}) stay "
               f"in memory; {_mib(room)} is left for the expert cache"]
    if cache < layout.token_demand_mib:
        reasons.append(f"that is less than one token's experts ({_mib(layout.token_demand_mib)}):"
                       " a cache that small hits almost nothing, so none (every routed expert "
                       "is read)")
        cache = 0
    else:
        reasons.append(f"expert cache {cache} MiB of {_mib(layout.expert_mib)} of experts (one "
                       f"token routes {_mib(layout.token_demand_mib)})")
    return Advice("stream", True, cache, 0.0, needed_mib=streamed + cache,
                  reasons=tuple(reasons), **common)


def with_probe(advice: Advice, probe: ProbeResult) -> Advice:
    """The plan with the probe's expected hit rate, and dropping where the replay favours it."""
    frac, notes = 0.0, []
    if advice.stream and advice.cache_mb > 0:
        worth = [d for d in probe.drops if d.reads_avoided_pct >= DROP_MIN_AVOIDED_PCT
                 and math.isfinite(d.mass_dropped_pct)
                 and d.mass_dropped_pct <= DROP_MAX_MASS_PCT]
        if worth:
            best = max(worth, key=lambda d: d.frac)
            frac = best.frac
            notes.append(f"dropping at {best.frac:g}: avoids {best.reads_avoided_pct:.0f} % of "
                         f"the reads for {best.mass_dropped_pct:.1f} % of the router's weight "
                         "(lossy: answers change)")
        elif probe.drops:
            notes.append("dropping: off (in the probe it avoided under "
                         f"{DROP_MIN_AVOIDED_PCT:g} % of reads, or cost more than "
                         f"{DROP_MAX_MASS_PCT:g} % of the router's weight)")
        else:
            notes.append("dropping: off (the probe recorded no router weights to judge it by)")
    return Advice(advice.verdict, advice.stream, advice.cache_mb, frac, advice.threads,
                  advice.io_threads, advice.needed_mib, advice.available_mib, advice.reasons,
                  probe=probe, notes=tuple(notes))


def format_advice(model: str, layout: Layout, machine: Machine, advice: Advice) -> str:
    lines = [
        f"model: {model}: {_mib(layout.weights_mib)}"
        + (f" ({_mib(layout.expert_mib)} of it experts, {_mib(layout.dense_mib)} dense; one "
           f"token routes {_mib(layout.token_demand_mib)})" if layout.is_moe else " (dense)"),
        f"this machine: {_mib(machine.available_mib)} available of "
        f"{_mib(machine.total_mib)}, {machine.cores} cores",
        f"verdict: {advice.verdict}",
        *(f"  {r}" for r in advice.reasons),
        "",
        "settings:",
        f"  stream experts: {'yes' if advice.stream else 'no'}",
    ]
    if advice.stream:
        lines.append("  expert cache: " + (f"{advice.cache_mb} MiB" if advice.cache_mb > 0
                                           else "none"))
        lines.append("  dropping: " + (f"{advice.drop_cold_frac:g}" if advice.drop_cold_frac > 0
                                       else "off"))
        lines.append(f"  I/O lanes: {advice.io_threads}")
    lines.append(f"  compute threads: {advice.threads} ("
                 + ("recommended without a measurement; `chat`, `serve` and the window measure "
                    "the fastest count at open when streaming, unless -t is given)"
                    if advice.stream else f"the cores, up to {thread_choice.RECOMMENDED_MAX})"))
    wait = wait_policy.choose(cores=machine.cores, threads=advice.threads,
                              lanes=advice.io_threads, streaming=advice.stream)
    lines.append(f"  wait policy: {wait.label} ({wait.reason}; set by `chat` and the window "
                 f"at start, {wait_policy.ENV} overrides)")
    lines.append(f"  flags: {advice.flags}")
    p = advice.probe
    if p is not None:
        lines += ["", f"expected (routing probe: {p.tokens} generated tokens, replayed through "
                      f"the engine's LRU at {fixed(p.budget_mib, '.0f')} MiB):",
                  f"  cache hits while generating: {_pct(p.lru_hit_pct)} (Belady's optimum at "
                  f"this size: {_pct(p.belady_hit_pct)})",
                  f"  experts read per token: {p.mib_per_token:.1f} MiB"]
        lines += [f"  {n}" for n in advice.notes]
    elif advice.stream:
        lines += ["", "expected hit rate: not probed (--no-probe); dropping left off"]
    return "\n".join(lines) + "\n"


def _pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) or value < 0 else f"{value:.1f} %"


def _mib(value: float) -> str:
    return f"{fixed(value / 1024, '.2f')} GiB" if value >= 1024 else f"{fixed(value, '.0f')} MiB"
