"""Expert streaming inside a session: set-up around the context, and its per-token telemetry.

Set-up order: the streamer is created before the context (its eval callback goes into the context
parameters), then one warm-up decode captures the expert tensors from the graph, their GGUF file
positions are bound, dense weights are optionally read into private memory, and the expert
tensors are rebound onto memory the streamer owns. Telemetry is read from native counters after
each decode, outside the timed bracket, as deltas; so is the expert activity map (`activity()`),
which only runs when someone listens to tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from workbench.backend import llama
from workbench.backend.abort import AbortFlag
from workbench.config import Config
from workbench.engine.metrics import UNMEASURED, RunSummary, TokenMetrics
from workbench.engine.requests import ExpertActivity
from workbench.engine.route_recorder import RouteRecorder
from workbench.engine.warm_start import (
    frequency_path,
    load_frequencies,
    preload_order,
    save_frequencies,
)
from workbench.moe.budget import (
    MIB,
    CacheBudget,
    cliff_warning,
    drop_budget_problem,
    resolve_budget,
)
from workbench.moe.layout import ModelFacts, TensorInfo, expert_tensors, read_tensors
from workbench.moe.lean_load import LeanLoadReport, restore
from workbench.moe.registry import check_streamable
from workbench.moe.route_trace import RouteTrace, TraceMeta, TurnLoad
from workbench.moe.routes import Phase
from workbench.moe.streamer import (
    DropPolicy,
    ExpertMapSnapshot,
    ExpertStreamer,
    StreamCounters,
    StreamerError,
    SubstitutePolicy,
)

DENSE_PROBE_EVERY = 8  # tokens between two dense-residency samples
# At top-k <= this, frac/k is a large share of the routing (upstream measured at top-k 8: 12.5 %).
DROP_WARN_TOP_K = 4


def drop_warning(frac: float, top_k: int) -> str:
    """The open-time warning for dropping at a small top-k ("" when there is nothing to say)."""
    if frac <= 0 or top_k > DROP_WARN_TOP_K:
        return ""
    return (f"Dropping cold experts at {100 * frac:g}% with top-k {top_k}: the threshold is "
            f"{100 * frac / top_k:.1f}% of the routing here, against 12.5% at the top-k 8 it was "
            "measured on, so far more of the router's weight may be dropped. Lower "
            "--drop-cold-experts or turn it off if answers degrade.")


@dataclass(frozen=True, slots=True)
class StreamingInfo:
    """What the run info records about streaming (resolved at load)."""

    budget: CacheBudget
    o_direct: bool
    lanes: int
    dense_policy: str
    dense_bytes_read: int
    total_expert_bytes: int
    lean_load: bool  # the model load skipped reading the whole file
    load_note: str  # what the load did about that ("" when lean_load is off)


class StreamingRuntime:
    """Owns the ExpertStreamer of one session and turns its counters into telemetry."""

    def __init__(self, config: Config, facts: ModelFacts, *, record_routes: bool = False,
                 max_route_loads: int | None = None, warm_dir: Path | None = None,
                 record_scores: bool = False) -> None:
        check_streamable(facts.arch, facts.n_expert, facts.path.name)
        self.facts = facts
        self.experts = expert_tensors(facts.path)
        self.total_expert_bytes = sum(t.n_bytes for t in self.experts)
        dense_bytes = facts.tensor_bytes - self.total_expert_bytes
        self.budget = resolve_budget(
            cache_mb=config.cache_mb, auto=config.cache_auto, floor_mb=config.cache_floor_mb,
            ceil_mb=config.cache_ceil_mb, total_expert_bytes=self.total_expert_bytes,
            mem_available_bytes=psutil.virtual_memory().available,
            dense_reserved_bytes=dense_bytes if config.dense_weights == "anon" else 0,
        )
        self.dense_policy = config.dense_weights
        # One token's worst-case expert demand: every MoE layer routes top-k distinct experts.
        top_k = config.n_expert_used or facts.n_expert_used
        self.top_k = top_k
        per_layer: dict[int, int] = {}
        for t in self.experts:
            per_layer[t.layer] = per_layer.get(t.layer, 0) + t.expert_stride
        self.expert_bytes = per_layer  # MoE layer -> one expert's bytes, all projections
        self.token_demand_bytes = sum(b * min(top_k, facts.n_expert) for b in per_layer.values())
        # validate() refuses dropping without the cache; this refuses a cache too small to hit
        # (known only now: automatic sizing and the model's expert sizes); native checks again.
        self.drop = DropPolicy(config.drop_cold_frac, config.drop_renorm, config.drop_prefill)
        if problem := drop_budget_problem(self.drop.frac, self.budget, self.token_demand_bytes):
            raise StreamerError(problem)
        self.substitute = SubstitutePolicy(config.expert_substitute,
                                           config.expert_substitute_prefill)
        if self.substitute.margin > 0 and not self.budget.enabled:
            raise StreamerError(
                f"preferring cached experts (expert_substitute={self.substitute.margin:g}) needs "
                f"the expert cache, but it is off ({self.budget.explanation}): set --cache-mb N "
                "or --cache-auto, or --expert-substitute 0")
        self.streamer = ExpertStreamer(
            list(facts.shards), lanes=config.io_threads, o_direct=config.o_direct,
            budget_bytes=self.budget.bytes, trace=record_routes, drop=self.drop,
            substitute=self.substitute, trace_scores=record_routes and record_scores,
        )
        self.cache_policy = config.cache_policy if self.budget.enabled else "lru"
        self.cache_guard = bool(config.cache_guard and self.budget.enabled)
        if self.budget.enabled:
            self.streamer.set_cache_policy(self.cache_policy, self.cache_guard)
        # Warm start: the routing frequencies of earlier sessions (None: not kept at all).
        self._warm_path = (frequency_path(warm_dir, facts.path)
                           if warm_dir is not None and self.budget.enabled else None)
        self._warm_counts: np.ndarray | None = None
        self._warm_on = bool(config.cache_warm_start)
        self.prefetch = bool(config.prefetch and self.budget.enabled)
        self._warm_note = ""
        self.preloaded: tuple[tuple[int, int], ...] = ()
        self.routes = RouteRecorder(self.streamer, max_route_loads) if record_routes else None
        self.dense_bytes_read = 0
        self.lean: LeanLoadReport | None = None  # set by the session around the model load
        self._drop_warning = drop_warning(self.drop.frac, top_k)
        self.warnings = self._warnings()
        self._dense_frac = UNMEASURED
        self._tokens_since_probe = 0
        self._last: StreamCounters | None = None
        self._gen_start: StreamCounters | None = None
        self._map_last: ExpertMapSnapshot | None = None  # baseline of the next activity delta
        self._sub_last: np.ndarray | None = None  # the same for the substituted map
        self._moe_layers: np.ndarray | None = None
        self.failed = ""

    def lean_blank(self) -> list[TensorInfo]:
        """What the lean load may leave unread: every expert tensor, which the streamer reads
        itself, and under `anon` every dense weight too, which it reads into private memory."""
        if self.dense_policy != "anon":
            return list(self.experts)
        return read_tensors(self.facts.path)

    @property
    def eval_callback(self) -> tuple[int, int]:
        return self.streamer.eval_callback

    def attach(self, ctx: llama.Context, model: llama.Model, abort: AbortFlag) -> None:
        """Capture with one warm-up decode, bind, and start streaming. Leaves the KV empty."""
        self.streamer.attach_abort_flag(abort)
        self.streamer.begin_capture()
        rc = ctx.decode([model.bos])
        self.streamer.end_capture()
        ctx.clear()
        if rc != 0:
            raise RuntimeError(f"the capture warm-up decode failed (llama_decode returned {rc})")
        self.streamer.bind(self.experts)
        if self.dense_policy == "anon":
            names = {t.name for t in self.experts}
            unused: list[TensorInfo] = []
            self.dense_bytes_read = self.streamer.read_dense_into_memory(
                read_tensors(self.facts.path), names, unused)
            if self.lean is not None and self.lean.effective:
                # Blanked for the load but never rebound: give them their file pages back.
                restore(self.lean, self.facts.shards, unused)
        self.streamer.activate()
        if self.prefetch:
            self.streamer.set_prefetch(True)
        self._warm_start()
        self._last = self.streamer.counters()
        if self.routes is not None:
            self.routes.discard_pending()

    def _warm_start(self) -> None:
        """Read the most routed experts of earlier sessions into the cache, within its budget."""
        if self._warm_path is None:
            return
        shape = (self.facts.n_layer, self.facts.n_expert)
        self._warm_counts, self._warm_note = load_frequencies(self._warm_path, shape)
        self.warnings = self._warnings()
        if not self._warm_on or self._warm_counts is None:
            return
        order = preload_order(self._warm_counts, self.streamer.layer_experts())
        taken = self.streamer.preload(order)
        self.preloaded = tuple(order[:taken])

    def save_frequencies(self) -> None:
        """This session's routing, added to the model's frequency file (warm start)."""
        if self._warm_path is None:
            return
        snap = self._expert_map()
        if not snap.routed.any():
            return  # nothing routed (a failed open, an unused session): keep the file as it is
        try:
            save_frequencies(self._warm_path, snap.routed, self._warm_counts)
        except OSError as exc:  # never lose the session's close over it
            self.warnings.append(f"warm start: could not save {self._warm_path.name} ({exc})")

    # ---- routing record ---------------------------------------------------------------------

    def begin_turn(self, turn: int, conversation: str | None) -> None:
        if self.routes is not None:
            self.routes.begin_turn(turn, conversation)

    def record_routes(self, turn: int, phase: Phase, first_step: int) -> None:
        """After a decode: file the loads it routed (a no-op unless routes are recorded)."""
        if self.routes is not None:
            self.routes.collect(turn, phase, first_step)

    def route_meta(self) -> TraceMeta:
        budget = self.streamer.counters().budget_now if self.budget.enabled else -1
        return TraceMeta(
            model=self.facts.path.name, arch=self.facts.arch, n_layer=self.facts.n_layer,
            n_expert=self.facts.n_expert, n_expert_used=self.top_k, cache_budget_bytes=budget,
            expert_bytes=dict(self.expert_bytes), cache_policy=self.cache_policy,
            cache_guard=self.cache_guard, preloaded=self.preloaded, prefetch=self.prefetch,
        )

    def route_trace(self, turns: list[int] | None = None) -> RouteTrace:
        """The recorded routing (of `turns`, or all kept) with its preamble; no loads if routes
        are not recorded."""
        loads = self.routes.loads(turns) if self.routes is not None else []
        return RouteTrace(self.route_meta(), [TurnLoad(t, ld) for t, ld in loads])

    @property
    def info(self) -> StreamingInfo:
        c = self._last or self.streamer.counters()
        return StreamingInfo(
            budget=self.budget, o_direct=c.o_direct, lanes=c.lanes, dense_policy=self.dense_policy,
            dense_bytes_read=self.dense_bytes_read, total_expert_bytes=self.total_expert_bytes,
            lean_load=self.lean is not None and self.lean.effective,
            load_note=self.lean.note if self.lean is not None else "",
        )

    # ---- telemetry --------------------------------------------------------------------------

    def start_prefill(self) -> None:
        """Called before a prompt is read: dropping stays off there unless drop_prefill."""
        self.streamer.set_phase(Phase.PREFILL)

    def set_position(self, position: int) -> None:
        """The context position the next decode call starts at (for route records)."""
        self.streamer.set_position(position)

    def start_generation(self, position: int = -1) -> None:
        """Called after the prefill: per-token deltas and the summary start here. `position` is
        where the first generated token goes in the context (route records)."""
        self.streamer.set_phase(Phase.DECODE)
        self.streamer.set_position(position)
        self._last = self._gen_start = self.streamer.counters()
        # The map shows generated tokens only: the prompt's routings would swamp it.
        self._map_last = self._expert_map()
        if self.substitute.margin > 0:
            self._sub_last = self.streamer.substituted_map(*self._map_last.routed.shape)

    def fill(self, row: TokenMetrics) -> None:
        """Sets the streaming fields of a token's row from the counter deltas of its decode."""
        now = self.streamer.counters()
        last = self._last
        assert last is not None
        io_ms = (now.io_ns - last.io_ns) / 1e6
        mgmt_ms = (now.mgmt_ns - last.mgmt_ns) / 1e6
        row.io_ms = io_ms
        row.mgmt_ms = mgmt_ms
        # The residual: what the decode spent outside reads and cache management, clamped.
        row.compute_ms = max(0.0, row.wall_ms - io_ms - mgmt_ms)
        row.read_bytes = now.read_bytes - last.read_bytes
        row.cache_hit_pct = now.hit_pct if self.budget.enabled else UNMEASURED
        row.cache_budget_mib = now.budget_now / MIB if self.budget.enabled else UNMEASURED
        # A mincore sweep over the dense weights every few tokens (it walks their page tables).
        if self._tokens_since_probe % DENSE_PROBE_EVERY == 0:
            self._dense_frac = self.streamer.dense_resident_frac()
        self._tokens_since_probe += 1
        row.dense_resident_frac = self._dense_frac
        if self.drop.frac > 0:
            row.experts_routed = now.experts_routed - last.experts_routed
            row.experts_dropped = now.experts_dropped - last.experts_dropped
        if self.substitute.margin > 0:
            row.experts_reranked = now.experts_reranked - last.experts_reranked
            row.experts_substituted = now.experts_substituted - last.experts_substituted
        self._last = now

    def activity(self) -> ExpertActivity:
        """Routings since the previous call (or the generation's start) and the residency now.

        Two native copies and one subtraction over n_layer x n_expert cells; called after each
        token's decode, outside the timed bracket, and only when a caller listens to tokens."""
        now = self._expert_map()
        last = self._map_last
        # uint32 arithmetic wraps, so the difference stays right past 2^32 cumulative routings.
        routed = now.routed - last.routed if last is not None else now.routed
        self._map_last = now
        if self._moe_layers is None or len(self._moe_layers) != len(now.layer_experts):
            self._moe_layers = now.layer_experts > 0
        holds = (self.streamer.entry_states(*now.resident.shape) if self.budget.enabled
                 else None)
        substituted = None
        if self.substitute.margin > 0:
            sub_now = self.streamer.substituted_map(*now.routed.shape)
            sub_last = self._sub_last
            substituted = (sub_now - sub_last if sub_last is not None
                           and sub_last.shape == sub_now.shape else sub_now)
            self._sub_last = sub_now
        return ExpertActivity(routed=routed, resident=now.resident, moe_layers=self._moe_layers,
                              holds=holds, policy=self.cache_policy if self.budget.enabled else "",
                              cached=now.cached, substituted=substituted)

    def _expert_map(self) -> ExpertMapSnapshot:
        return self.streamer.expert_map(self.facts.n_layer, self.facts.n_expert)

    def fill_summary(self, summary: RunSummary) -> None:
        start, end = self._gen_start, self.streamer.counters()
        if start is None:
            return
        n = summary.n_generated
        summary.moe_read_mib = (end.read_bytes - start.read_bytes) / MIB
        summary.cache_evictions = end.evictions
        summary.cache_rereads = end.rereads
        summary.cache_resizes = end.resizes
        summary.token_demand_mib = end.token_demand / MIB
        summary.layer_demand_mib = end.layer_demand / MIB
        summary.experts_routed = end.routed - start.routed
        if self.drop.frac > 0:
            summary.experts_dropped = end.experts_dropped - start.experts_dropped
            # One definition with the replay's: dropped weight over the router's whole decode
            # weight (every generated token's routing, examined by the rule or not).
            total = end.decode_weight - start.decode_weight
            dropped = end.decode_dropped_weight - start.decode_dropped_weight
            summary.drop_weight_pct = 100.0 * dropped / total if total > 0 else UNMEASURED
        if self.substitute.margin > 0:
            summary.experts_reranked = end.experts_reranked - start.experts_reranked
            summary.experts_substituted = end.experts_substituted - start.experts_substituted
        if self.budget.enabled:
            summary.cache_hit_pct = end.hit_pct
            summary.cache_resident_mib = end.resident_now / MIB
            summary.cache_budget_mib = end.budget_now / MIB
        if n:
            io_s = (end.io_ns - start.io_ns) / 1e9 / n
            mgmt_s = (end.mgmt_ns - start.mgmt_ns) / 1e9 / n
            summary.moe_io_s_per_token = io_s
            summary.moe_mgmt_s_per_token = mgmt_s
            summary.moe_compute_s_per_token = max(0.0, summary.s_per_token - io_s - mgmt_s)

    def set_budget_mib(self, mib: float) -> None:
        budget = CacheBudget(int(mib * MIB), False, f"set to {mib:g} MiB on the open session")
        if problem := drop_budget_problem(self.drop.frac, budget, self.token_demand_bytes):
            raise StreamerError(problem)  # the cache in force stays as it was
        self.streamer.set_budget(budget.bytes)
        self.budget = budget
        self.warnings = self._warnings()

    def _warnings(self) -> list[str]:
        return [w for w in (cliff_warning(self.budget, self.token_demand_bytes),
                            self._drop_warning, self._warm_note) if w]

    def close(self) -> None:
        if self.streamer.is_open:  # close is idempotent: save once
            self.save_frequencies()
        self.streamer.close()
