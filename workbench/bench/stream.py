"""`bench stream`: the expert streamer measured side by side, interleaved, with intervals.

1. machinery: streaming with a cache that holds every expert vs the same model resident.
2. memory: RAM held below the model's size by a balloon; streaming with an automatic cache vs
   plain mmap (streaming off). Each run starts with the model file dropped from the page cache.
3. io: the engine's effective read bandwidth (bytes read / time waiting for reads) vs a standalone
   O_DIRECT pread benchmark at the same read size and lane count.
4. threads: the entry-point arrangement. Resident vs streamed with a cache at a high hit rate,
   both opened and generated on the engine thread (chat's arrangement), and streamed opened on
   another thread and generated on the engine thread (the split that made two OpenMP pools
   fight), with context switches per token.
5. routing: not a timing. How the model's greedy decode routes (route_stats): distinct tokens,
   LRU hit rate by cache size, consecutive-token expert overlap, popularity skew. It says whether
   the other figures were measured on routing that churns like a real model's.

Every session is opened, used and closed on one engine thread (bench/engine.py), the
arrangement and the turn code (Session.generate) `chat` uses, so a bench cannot measure a path
users do not run.

Every figure is a ratio of arms measured in the same run, in alternating order (ABAB, BABA...),
with a paired bootstrap interval over the repeats. tok/s is tokens / sum of decode wall.
"""

from __future__ import annotations

import hashlib
import math
import resource
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.backend import native
from workbench.bench.balloon import Balloon
from workbench.bench.engine import close_session, engine, on_engine, open_session, opened
from workbench.bench.matrix import drop_page_cache
from workbench.bench.stats import Interval, paired_ratio_ci
from workbench.config import Config
from workbench.engine.requests import GenerateRequest, GenerateResult
from workbench.engine.session import Session
from workbench.moe import route_stats
from workbench.moe.layout import expert_tensors, read_model_facts
from workbench.moe.routes import Phase, RouteLoad, looked_up
from workbench.moe.synth import spec_for, write_synthetic_moe
from workbench.paths import cache_dir

MIB = 1 << 20
PROMPT = "The expert streaming benchmark reads routed experts from the model file."
Log = Callable[[str], None]


def bench_model(gib: float, seed: int = 0) -> Path:
    """A bench-size synthetic MoE of about `gib` GiB of experts, generated once and cached."""
    # The recipe is in the name: a file cached by an older recipe (a repeated token, or a flatter
    # router) must not stand in for today's, so any change to the spec names a new file.
    spec = spec_for("qwen3moe", "bench", target_gib=gib)
    recipe = hashlib.sha256(repr(spec).encode()).hexdigest()[:8]
    out = cache_dir() / "bench" / f"synthetic-moe-churn-{gib:g}g-seed{seed}-{recipe}.gguf"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)  # the cache directory is ours
        # Whole or absent (written under a temporary name): an interrupted generation is never
        # mistaken for the cached model next time.
        write_synthetic_moe(out, arch="qwen3moe", size="bench", seed=seed, target_gib=gib)
    return out


@dataclass(frozen=True, slots=True)
class ArmRun:
    wall_ms: list[float]  # per generated token (the decode bracket)
    read_bytes: int
    io_ms: float
    # Context switches (voluntary + involuntary, every thread of the process) from the end of
    # the prefill to the end of the turn; read outside the per-token bracket. -1: unmeasured.
    ctx_switches: int = -1

    @property
    def switches_per_token(self) -> float:
        return self.ctx_switches / len(self.wall_ms) if self.ctx_switches >= 0 else -1.0

    @property
    def seconds(self) -> float:
        return sum(self.wall_ms) / 1e3

    @property
    def tok_s(self) -> float:
        return len(self.wall_ms) / self.seconds

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.wall_ms, q))


def _switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # summed over the process's threads
    return usage.ru_nvcsw + usage.ru_nivcsw


def _turn(session: Session, n_tokens: int) -> ArmRun:
    """One greedy answer, on the calling thread (the engine thread: see _generate)."""
    rows = []
    at_decode = [-1]

    def prefill_done(progress) -> None:
        if progress.done == progress.total:
            at_decode[0] = _switches()

    result = session.generate(GenerateRequest(text=PROMPT, n_predict=n_tokens, new_chat=True),
                              on_token=lambda event: rows.append(event.metrics),
                              on_prefill=prefill_done)
    ended = _switches()
    if not result.ok:
        raise RuntimeError(result.error)
    return ArmRun(
        wall_ms=[r.wall_ms for r in rows],
        read_bytes=sum(max(0, r.read_bytes) for r in rows),
        io_ms=sum(max(0.0, r.io_ms) for r in rows),
        ctx_switches=ended - at_decode[0] if at_decode[0] >= 0 else -1,
    )


def _generate(session: Session, n_tokens: int) -> ArmRun:
    """One greedy answer on the engine thread, the way `chat` runs a turn."""
    return on_engine(lambda: _turn(session, n_tokens))


def _config(model: Path, threads: int, n_tokens: int, **changes: object) -> Config:
    return Config(model=str(model), chat_template=False, n_ctx=max(512, n_tokens + 64),
                  n_threads=threads, n_predict=n_tokens, **changes)


def _ratio_line(name: str, ratio: Interval, extra: str) -> str:
    return (f"{name} ratio={ratio.estimate:.3f} ci95=[{ratio.low:.3f}, {ratio.high:.3f}] {extra}")


def machinery(model: Path, *, repeats: int, n_tokens: int, threads: int, log: Log) -> str:
    """Streaming whose cache holds every expert (100 % hits after warm-up) vs resident."""
    total = sum(t.n_bytes for t in expert_tensors(model))
    resident = open_session(_config(model, threads, n_tokens))
    streamed = open_session(_config(model, threads, n_tokens, moe_stream=True,
                             cache_mb=math.ceil(total / MIB) + 1))
    try:
        _generate(resident, n_tokens)
        _generate(streamed, n_tokens)  # warm-up: every routed expert is now cached
        runs: dict[str, list[ArmRun]] = {"resident": [], "streamed": []}
        for i in range(repeats):
            for arm in (("resident", "streamed") if i % 2 == 0 else ("streamed", "resident")):
                runs[arm].append(_generate(resident if arm == "resident" else streamed, n_tokens))
            log(f"machinery {i + 1}/{repeats}: resident {runs['resident'][-1].tok_s:.2f} tok/s, "
                f"streamed {runs['streamed'][-1].tok_s:.2f} tok/s")
        hit = streamed.streaming.streamer.counters().hit_pct
    finally:
        close_session(streamed)
        close_session(resident)
    ratio = paired_ratio_ci([r.seconds for r in runs["resident"]],
                            [r.seconds for r in runs["streamed"]])
    return _ratio_line("stream machinery", ratio, f"(streamed/resident tok/s; goal >= 0.95) "
                       f"resident_tok_s={_rate(runs['resident']):.2f} "
                       f"streamed_tok_s={_rate(runs['streamed']):.2f} hit_pct={hit:.1f}")


def bigger_than_memory(model: Path, *, leave_mib: int, floor_mb: int, repeats: int,
                       n_tokens: int, threads: int, log: Log) -> str:
    """RAM held below the model's size: streaming with an auto cache vs plain mmap."""
    facts = read_model_facts(model)
    runs: dict[str, list[ArmRun]] = {"mmap": [], "streamed": []}
    budget_mib = -1.0
    with Balloon(leave_mib * MIB) as balloon:
        log(f"memory: balloon holds {balloon.size / MIB:.0f} MiB; model is "
            f"{facts.file_size / MIB:.0f} MiB, about {leave_mib} MiB left available")
        for i in range(repeats):
            for arm in (("mmap", "streamed") if i % 2 == 0 else ("streamed", "mmap")):
                drop_page_cache(model)
                changes = ({"moe_stream": True, "cache_auto": True, "cache_floor_mb": floor_mb}
                           if arm == "streamed" else {})
                with opened(_config(model, threads, n_tokens, **changes)) as s:
                    if s.streaming is not None:
                        budget_mib = s.streaming.budget.mib
                    runs[arm].append(_generate(s, n_tokens))
            log(f"memory {i + 1}/{repeats}: mmap {runs['mmap'][-1].tok_s:.3f} tok/s, "
                f"streamed {runs['streamed'][-1].tok_s:.3f} tok/s")
    ratio = paired_ratio_ci([r.seconds for r in runs["mmap"]],
                            [r.seconds for r in runs["streamed"]])
    tails = " ".join(f"{arm}_p99/p50={_tail(rs):.2f}" for arm, rs in runs.items())
    tails += f" (first {TAIL_TRIM} tokens of each cold run trimmed)"
    return _ratio_line("stream memory", ratio, f"(streamed/mmap tok/s; goal >= 3, streamed "
                       f"p99/p50 < 2) mmap_tok_s={_rate(runs['mmap']):.3f} streamed_tok_s="
                       f"{_rate(runs['streamed']):.3f} {tails} auto_cache_mib={budget_mib:.0f}")


def io_efficiency(model: Path, *, lanes: int, repeats: int, n_tokens: int, threads: int,
                  log: Log) -> str:
    """The engine's read bandwidth (no cache, O_DIRECT) vs standalone O_DIRECT preads of the very
    same byte ranges on as many threads.

    Greedy decoding routes identically on every repeat, so the decode's ranges are recorded once
    (in the warm-up, prefill loads left out) and both arms read exactly those, in alternating
    order."""
    experts = expert_tensors(model)
    by_layer: dict[int, list] = {}
    for t in experts:
        by_layer.setdefault(t.layer, []).append(t)
    stride = int(np.median([t.expert_stride for t in experts]))
    engine_bw: list[float] = []
    bench_bw: list[float] = []
    config = _config(model, threads, n_tokens, moe_stream=True, io_threads=lanes)
    with opened(config, record_routes=True) as s:
        if not s.streaming.streamer.counters().o_direct:
            return "stream io: skipped (this file system refuses O_DIRECT)"
        on_engine(lambda: s.generate(
            GenerateRequest(text=PROMPT, n_predict=n_tokens, new_chat=True)))
        ranges = [(t.expert_offset(e), t.expert_stride)
                  for layer, ids in decode_lookups(s) for e in ids for t in by_layer[layer]]
        for i in range(repeats):
            for arm in (("engine", "standalone") if i % 2 == 0 else ("standalone", "engine")):
                if arm == "engine":
                    run = _generate(s, n_tokens)
                    engine_bw.append(run.read_bytes / (run.io_ms / 1e3))
                else:
                    bench_bw.append(native.iobench(str(model), ranges, lanes=lanes))
            log(f"io {i + 1}/{repeats}: engine {engine_bw[-1] / MIB:.0f} MiB/s, standalone "
                f"{bench_bw[-1] / MIB:.0f} MiB/s ({len(ranges)} reads of ~{stride / 1024:.0f} "
                f"KiB, {lanes} lanes)")
    ratio = paired_ratio_ci(engine_bw, bench_bw)
    return _ratio_line("stream io", ratio, f"(engine/standalone O_DIRECT bandwidth; goal >= 0.8) "
                       f"engine_mib_s={np.mean(engine_bw) / MIB:.0f} "
                       f"standalone_mib_s={np.mean(bench_bw) / MIB:.0f} "
                       f"read_kib={stride / 1024:.0f} lanes={lanes}")


# ---- threads: the entry-point arrangement ------------------------------------------------------

THREAD_ARMS = ("resident", "same", "split")
HIT_GOAL_PCT = 98.0


def _open_split(config: Config) -> Session:
    """The split arrangement, on purpose: the session is opened on the calling thread (its
    context and the streamer's capture decode, so this thread's OpenMP pool exists and stays,
    as chat's main thread did) and handed to the engine thread, which generates."""
    if engine().ident == threading.get_ident():
        raise RuntimeError("the split arm must open its session off the engine thread")
    session = Session.open(config)
    on_engine(session.take_thread)
    return session


def _hits(session: Session) -> tuple[int, int]:
    c = on_engine(lambda: session.streaming.streamer.counters())
    return c.hits, c.lookups


def entry_threads(model: Path, *, cache_mb: int, repeats: int, n_tokens: int, threads: int,
                  log: Log) -> str:
    """Resident vs streamed at a high hit rate through chat's path (open and generate on the
    engine thread), and streamed opened on another thread and generated on the engine thread.

    `cache_mb` 0 gives a cache that holds every expert. The three arms rotate (ABC, CBA, ...);
    the hit rate is over the measured runs only (the warm-up's misses left out)."""
    if cache_mb <= 0:
        cache_mb = math.ceil(sum(t.n_bytes for t in expert_tensors(model)) / MIB) + 1
    streamed = _config(model, threads, n_tokens, moe_stream=True, cache_mb=cache_mb)
    sessions: dict[str, Session] = {}
    try:
        sessions["resident"] = open_session(_config(model, threads, n_tokens))
        sessions["same"] = open_session(streamed)
        sessions["split"] = _open_split(streamed)
        for s in sessions.values():
            _generate(s, n_tokens)  # warm-up: the caches fill, the pools start
        start = {arm: _hits(sessions[arm]) for arm in ("same", "split")}
        runs: dict[str, list[ArmRun]] = {arm: [] for arm in THREAD_ARMS}
        for i in range(repeats):
            for arm in THREAD_ARMS if i % 2 == 0 else THREAD_ARMS[::-1]:
                runs[arm].append(_generate(sessions[arm], n_tokens))
            log(f"threads {i + 1}/{repeats}: " + ", ".join(
                f"{arm} {runs[arm][-1].tok_s:.2f} tok/s {runs[arm][-1].switches_per_token:.0f} "
                "switches/token" for arm in THREAD_ARMS))
        hit = {}
        for arm in ("same", "split"):
            hits, lookups = _hits(sessions[arm])
            d_lookups = lookups - start[arm][1]
            hit[arm] = 100.0 * (hits - start[arm][0]) / d_lookups if d_lookups else -1.0
    finally:
        for s in sessions.values():
            close_session(s)
    return "\n".join(thread_lines(runs, hit, cache_mb))


def thread_lines(runs: dict[str, list[ArmRun]], hit: dict[str, float], cache_mb: int
                 ) -> list[str]:
    """The threads arm's figures: tok/s ratios and context switches per token, each a paired
    ratio over the repeats with its 95 % interval."""
    seconds = {arm: [r.seconds for r in rs] for arm, rs in runs.items()}
    same = paired_ratio_ci(seconds["resident"], seconds["same"])
    split = paired_ratio_ci(seconds["resident"], seconds["split"])
    split_same = paired_ratio_ci(seconds["same"], seconds["split"])
    rates = " ".join(f"{arm}_tok_s={_rate(rs):.2f}" for arm, rs in runs.items())
    hit_ok = "yes" if hit["same"] >= HIT_GOAL_PCT else "NO: raise --cache-mb"
    lines = [
        _ratio_line("stream threads same/resident", same,
                    f"(streamed/resident tok/s, both opened and generated on the engine thread "
                    f"as chat does; goal >= 1.0 at >= {HIT_GOAL_PCT:g} % hits) {rates} "
                    f"hit_pct={hit['same']:.1f} hit_goal_met={hit_ok} cache_mb={cache_mb}"),
        _ratio_line("stream threads split/resident", split,
                    "(streamed opened on another thread, generated on the engine thread, "
                    f"vs resident tok/s) split_hit_pct={hit['split']:.1f}"),
        _ratio_line("stream threads split/same", split_same,
                    "(the split arrangement's tok/s vs chat's; below 1: the pools fight)"),
    ]
    switches = {arm: [r.ctx_switches for r in rs] for arm, rs in runs.items()}
    if all(n >= 0 for ns in switches.values() for n in ns):
        per_token = " ".join(
            f"{arm}_switches_per_token={sum(ns) / sum(len(r.wall_ms) for r in runs[arm]):.1f}"
            for arm, ns in switches.items())
        # +1 on both sides: an arm with no switch at all still gives a finite ratio.
        ratio = paired_ratio_ci([n + 1 for n in switches["split"]],
                                [n + 1 for n in switches["same"]])
        lines.append(_ratio_line("stream threads switches split/same", ratio,
                                 f"(context switches per decoded token, every thread, read "
                                 f"outside the timed bracket) {per_token}"))
    else:
        lines.append("stream threads switches: unmeasured (no prefill-end reading)")
    return lines


# ---- routing: how the model routes (not a timing) -------------------------------------------

ROUTING_CACHE_FRACS = (0.10, 0.25, 0.50, 0.75)


@dataclass(frozen=True, slots=True)
class DecodeRoutes:
    """One greedy decode's routing: the decode loads (prefill's left out) and the context."""

    result: GenerateResult
    loads: list[tuple[int, list[int]]]  # (layer, distinct expert ids) per decode load
    tokens: list[int]  # the whole context after the turn
    weights: np.ndarray  # (decode loads' tokens, k) final router weights, as the engine applied

    @property
    def generated(self) -> list[int]:
        n = self.result.summary.n_generated if self.result.ok and self.result.summary else 0
        return self.tokens[len(self.tokens) - n:]


def _decode_loads(session: Session) -> list[RouteLoad]:
    """The recorded decode loads (session opened with record_routes); the prefill's are left
    out, since a prefill load merges a whole batch's experts."""
    recorder = session.streaming.routes if session.streaming is not None else None
    recorded = recorder.loads() if recorder is not None else []
    return [load for _, load in recorded if load.phase == Phase.DECODE]


def decode_lookups(session: Session) -> list[tuple[int, list[int]]]:
    """The recorded decode loads as the cache looked them up."""
    return looked_up(_decode_loads(session))


def decode_routes(config: Config, n_tokens: int) -> DecodeRoutes:
    """A fresh streamed session's greedy decode of PROMPT, with its decode loads recorded."""
    with Session.open(config, record_routes=True) as s:
        result = s.generate(GenerateRequest(text=PROMPT, n_predict=n_tokens, new_chat=True))
        loads = _decode_loads(s)
        weights = (np.concatenate([load.weights for load in loads]) if loads
                   else np.empty((0, 0), dtype=np.float32))
        return DecodeRoutes(result, looked_up(loads), list(s.kv_tokens), weights)


def routing(model: Path, *, n_tokens: int, threads: int, log: Log) -> str:
    """Route figures of one greedy decode (prefill loads left out), from its recorded routes."""
    traced = decode_routes(_config(model, threads, n_tokens, moe_stream=True), n_tokens)
    result, loads, generated = traced.result, traced.loads, traced.generated
    if not result.ok or not loads:
        return f"stream routing: no decode routing recorded ({result.error or 'no loads'})"
    facts = read_model_facts(model)
    n_expert = facts.n_expert
    n_layers = len({layer for layer, _ in loads})
    caps = [max(1, round(f * n_layers * n_expert)) for f in ROUTING_CACHE_FRACS]
    curve = route_stats.lru_curve(loads, caps)
    log(f"routing: {len(generated)} tokens, {len(loads)} decode loads over {n_layers} layers")
    lru = " ".join(f"lru_hit@{f:.0%}={h:.3f}" for f, h in zip(ROUTING_CACHE_FRACS, curve,
                                                                 strict=True))
    real = route_stats.routing_figures(loads, traced.weights, n_expert=n_expert,
                                       n_expert_used=facts.n_expert_used, n_layers=n_layers)
    checks = route_stats.against(real)
    calibration = ("stream routing vs real (measured/target, ~ within tolerance, ! not; the "
                   "Qwen3-30B-A3B trace, route_stats.REAL_QWEN3_30B): "
                   + " ".join(f"real_{c.name}={c.measured:.3f}/{c.target:g}"
                              f"{'~' if c.ok else '!'}" for c in checks)
                   + f" within_tolerance={sum(c.ok for c in checks)}/{len(checks)}")
    return (f"stream routing distinct_tokens={len(set(generated))} "
            f"distinct_share={route_stats.distinct_share(generated):.3f} "
            f"tail_period={route_stats.tail_period(generated)} (0 = no cycle) {lru} "
            f"consecutive_overlap={route_stats.consecutive_overlap(loads):.3f} "
            f"(k/n_expert={facts.n_expert_used / n_expert:.3f} is no memory) "
            f"top10pct_share={route_stats.top_expert_share(loads, n_expert):.3f} "
            f"(0.1 is uniform) {_weight_fields(traced.weights)}\n{calibration}")


def _weight_fields(weights: np.ndarray) -> str:
    """The router weights' shape, as dropping sees it: the top slot, and the share of the other
    slots (and of the whole weight mass) below frac/k."""
    figures = route_stats.weight_figures(weights) if weights.size else None
    if figures is None or math.isnan(figures.top_slot_mean):
        return "router_weights=unmeasured"
    below = " ".join(f"below_{f:g}k_slots={figures.below_share[f]:.3f} "
                     f"below_{f:g}k_mass={figures.below_mass[f]:.3f}"
                     for f in sorted(figures.below_share))
    return (f"top_slot_mean={figures.top_slot_mean:.3f} top_slot_p10={figures.top_slot_p10:.3f} "
            f"{below}")


def _rate(runs: list[ArmRun]) -> float:
    return sum(len(r.wall_ms) for r in runs) / sum(r.seconds for r in runs)


TAIL_TRIM = 8  # each run starts cold: its first tokens are warm-up, not tail


def _tail(runs: list[ArmRun]) -> float:
    """p99/p50 of the per-token decode wall, the first TAIL_TRIM tokens of each run left out."""
    walls = np.concatenate([r.wall_ms[TAIL_TRIM:] for r in runs])
    return float(np.percentile(walls, 99) / np.percentile(walls, 50))
