"""The expert streamer's control plane: a typed wrapper over the native streamer.

The per-node work (isolating `ffn_moe_topk-<il>`, reading the routed slices, the LRU cache) runs
in C++ inside llama.cpp's eval callback; nothing here runs per node or per token except
`counters()` and `expert_map()`, which the session reads after each decode, outside the timed
bracket.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.backend import native
from workbench.backend.abort import AbortFlag
from workbench.config import CACHE_POLICIES
from workbench.moe.layout import ExpertTensor, TensorInfo
from workbench.moe.routes import Phase, RouteLoad


@dataclass(frozen=True, slots=True)
class DropPolicy:
    """Cache-aware expert dropping (see native/src/drop_policy.h); frac 0 is off."""

    frac: float = 0.0
    renorm: bool = True
    prefill: bool = False


@dataclass(frozen=True, slots=True)
class SubstitutePolicy:
    """Cache-aware expert substitution (native/src/substitute_policy.h); margin 0 is off."""

    margin: float = 0.0
    prefill: bool = False


def substitute_row(scores: np.ndarray, ids: np.ndarray, resident: np.ndarray,
                   margin: float) -> tuple[np.ndarray, int]:
    """The engine's own substitution rule on one row (native/src/substitute_policy.cpp), for
    tests and the replay's prediction: `scores` over every expert in the margin's space (log
    probabilities for a softmax router), the router's ids in rank order, residency per expert.
    Returns (the ids that run, the experts substituted)."""
    lib = native.load()
    sc = np.ascontiguousarray(scores, dtype=np.float32)
    res = np.ascontiguousarray(resident, dtype=np.uint8)
    out = np.ascontiguousarray(ids, dtype=np.int32).copy()
    if not (len(sc) == len(res) >= len(out) > 0):
        raise ValueError("scores and resident cover every expert; ids are the k routed ones")
    n = lib.wb_substitute_row(len(sc), sc.ctypes.data, res.ctypes.data, margin, len(out),
                              out.ctypes.data)
    if n < 0:
        raise ValueError(native.last_error(lib))
    return out, int(n)


# Test-only native switches (wb_streamer_params.debug_flags): tests/gates set them.
DEBUG_POISON_UNLOADED = 1  # unloaded expert slices hold 0xFF bytes (NaN): any read shows
DEBUG_NO_REPOINT = 2  # dropped slots keep their expert id (the poison guard's negative control)
DEBUG_LOST_TERMINAL = 4  # every layer learns a terminal weight node that never appears
DEBUG_NO_PIN = 8  # the row's top slot may be dropped too (the pin's negative control)


@dataclass(frozen=True, slots=True)
class DroppedRow:
    """One token row after the native drop rule (`drop_row`)."""

    weights: np.ndarray  # float32 (k,): 0 where dropped, survivors rescaled under renorm
    ids: np.ndarray  # int32 (k,): dropped slots repointed to the top expert
    dropped: np.ndarray  # bool (k,)
    dropped_weight: float  # before renormalisation
    total_weight: float


def drop_row(weights: np.ndarray, ids: np.ndarray, resident: np.ndarray, frac: float,
             renorm: bool = True, *, pin_top: bool = True) -> DroppedRow:
    """The engine's own drop rule on one row (native/src/drop_policy.cpp), for tests and tools.

    `pin_top=False` is the pin's negative control; the product never sets it."""
    lib = native.load()
    w = np.ascontiguousarray(weights, dtype=np.float32).copy()
    e = np.ascontiguousarray(ids, dtype=np.int32).copy()
    r = np.ascontiguousarray(resident, dtype=np.uint8)
    if not (len(w) == len(e) == len(r) > 0):
        raise ValueError("weights, ids and resident must be non-empty rows of one length")
    out = np.zeros(len(w), dtype=np.uint8)
    dropped_w, total_w = ctypes.c_double(), ctypes.c_double()
    lib.wb_drop_row(len(w), w.ctypes.data, e.ctypes.data, r.ctypes.data, frac, int(renorm),
                    int(pin_top), out.ctypes.data, ctypes.byref(dropped_w), ctypes.byref(total_w))
    return DroppedRow(w, e, out.astype(bool), dropped_w.value, total_w.value)


@dataclass(frozen=True, slots=True)
class StreamCounters:
    """A snapshot of the native counters (ns and bytes; see native/include)."""

    read_bytes: int
    requested_bytes: int
    io_ns: int
    mgmt_ns: int
    loads: int
    lookups: int
    hits: int
    routed: int
    evictions: int
    rereads: int
    resident_now: int
    budget_now: int
    token_demand: int
    layer_demand: int
    resizes: int
    experts_routed: int  # routed slots while dropping is on (prefill included)
    experts_dropped: int
    o_direct: bool
    lanes: int
    # The weight mass dropped is decode_dropped_weight / decode_weight (the replay's definition).
    decode_dropped_weight: float  # router weight of the slots dropped while decoding
    decode_weight: float  # router weight of every decode routing while dropping is on
    experts_reranked: int  # slots of the rows substitution examined (k per row)
    experts_substituted: int  # experts it brought into a row's set (changed sets only)

    @property
    def hit_pct(self) -> float:
        """Cumulative hit rate since the cache was created; -1 with no lookups."""
        return 100.0 * self.hits / self.lookups if self.lookups else -1.0


@dataclass(frozen=True, slots=True)
class ExpertMapSnapshot:
    """The native expert activity map at one moment; rows are layer indices, columns expert ids.

    Cells the streamer does not manage (dense layers, ids past a layer's expert count) are 0.
    """

    routed: np.ndarray  # (n_layer, n_expert) uint32: routed slots since activation, prefill too
    resident: np.ndarray  # (n_layer, n_expert) bool: in the expert cache now
    layer_experts: np.ndarray  # (n_layer,) int64: experts streamed per layer, 0 = not MoE
    cached: bool  # an LRU cache exists; without one nothing stays resident (all False)


@dataclass(frozen=True, slots=True)
class CacheStats:
    """The cache policy's own counters (wb_cache_stats): guard, warm start and prefetch."""

    transient_admissions: int
    preloaded_entries: int
    preloaded_bytes: int
    preload_read_bytes: int
    preload_ns: int
    preload_hits: int
    preload_unused: int
    prefetch_issued: int
    prefetch_bytes: int
    prefetch_hits: int
    prefetch_wasted_bytes: int
    prefetch_wait_ns: int
    prefetch_hit_bytes: int
    prefetch_read_ns: int
    policy: int
    guard: bool
    guard_active: bool
    prefetch: bool


# wb_streamer_set_cache_policy's codes: the declaration's order (config.CACHE_POLICIES).
POLICY_CODES = {name: code for code, name in enumerate(CACHE_POLICIES)}
# wb_streamer_entry_states' codes.
ENTRY_ABSENT, ENTRY_RESIDENT, ENTRY_TRANSIENT, ENTRY_AHEAD = 0, 1, 2, 3


class StreamerError(RuntimeError):
    """The streamer could not be set up or failed while reading; the message says why."""


class ExpertStreamer:
    """One model's expert streamer. Create, capture, bind, activate; then decode as usual."""

    debug_flags = 0  # tests patch this class attribute; never set in the product

    def __init__(self, shards: list[Path], *, lanes: int, o_direct: bool, budget_bytes: int,
                 trace: bool = False, drop: DropPolicy | None = None,
                 substitute: SubstitutePolicy | None = None, trace_scores: bool = False) -> None:
        self._lib = native.load()
        paths = (ctypes.c_char_p * len(shards))(*[os.fsencode(p) for p in shards])
        drop = drop or DropPolicy()
        substitute = substitute or SubstitutePolicy()
        params = native.WbStreamerParams(lanes, int(o_direct), budget_bytes, int(trace),
                                         drop.frac, int(drop.renorm), int(drop.prefill),
                                         self.debug_flags, substitute.margin,
                                         int(substitute.prefill), int(trace and trace_scores))
        ptr = self._lib.wb_streamer_new(paths, len(shards), params)
        if not ptr:
            reason = native.last_error(self._lib)
            raise StreamerError(f"cannot open the model for streaming: {reason}")
        self._ptr: int | None = ptr
        self._cached = budget_bytes >= 0
        self._layer_experts: np.ndarray | None = None  # fixed once streaming is active
        self._per_layer: np.ndarray | None = None  # the same, padded to the last map's rows
        self._shard_index = {str(p): i for i, p in enumerate(shards)}

    # ---- wiring into llama.cpp ----------------------------------------------------------------

    @property
    def eval_callback(self) -> tuple[int, int]:
        """(function address, user data) for llama_context_params.cb_eval."""
        address = ctypes.cast(self._lib.wb_streamer_eval, ctypes.c_void_p).value
        assert address is not None and self._ptr is not None
        return address, self._ptr

    def attach_abort_flag(self, flag: AbortFlag) -> None:
        """A failed read sets the flag's fatal bit, which aborts the decode in llama.cpp."""
        self._lib.wb_streamer_set_abort_flag(self._ptr, flag.handle)

    # ---- set-up ---------------------------------------------------------------------------------

    def begin_capture(self) -> None:
        self._check(self._lib.wb_streamer_capture_begin(self._ptr), "starting the capture")

    def end_capture(self) -> None:
        self._check(self._lib.wb_streamer_capture_end(self._ptr), "ending the capture")

    def captured_experts(self) -> list[str]:
        buf = ctypes.create_string_buffer(1 << 16)
        n = self._lib.wb_streamer_captured_experts(self._ptr, buf, len(buf))
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            n = self._lib.wb_streamer_captured_experts(self._ptr, buf, len(buf))
        if n < 0:
            raise StreamerError(native.last_error(self._lib))
        return [name for name in buf.value.decode().split("\n") if name]

    def bind(self, experts: list[ExpertTensor]) -> None:
        """Tell the native side where each captured expert tensor lives in the files."""
        by_name = {t.name: t for t in experts}
        captured = self.captured_experts()
        missing = [name for name in captured if name not in by_name]
        if missing:
            raise StreamerError(f"expert tensors in the graph but not in the GGUF: {missing[:3]}")
        for name in captured:
            t = by_name[name]
            self._check(
                self._lib.wb_streamer_bind_expert(
                    self._ptr, name.encode(), t.shard, t.offset, t.n_bytes, t.n_expert
                ),
                f"binding {name}",
            )

    def activate(self) -> None:
        self._check(self._lib.wb_streamer_activate(self._ptr), "activating expert streaming")
        self._layer_experts = self.layer_experts()

    def read_dense_into_memory(self, tensors: list[TensorInfo], expert_names: set[str],
                               skipped: list[TensorInfo] | None = None) -> int:
        """The `anon` dense policy: every non-expert weight the graph uses, read once into
        private memory (the kernel cannot evict it under pressure). Returns bytes read; the
        tensors the graph does not use go to `skipped`."""
        total = 0
        for t in tensors:
            if t.name in expert_names:
                continue
            ret = self._lib.wb_streamer_dense_anon(self._ptr, t.name.encode(), t.shard, t.offset,
                                                   t.n_bytes)
            if ret != 0:
                error = native.last_error(self._lib)
                if "was not captured" in error:
                    if skipped is not None:
                        skipped.append(t)
                    continue  # a GGUF tensor this graph never uses
                raise StreamerError(f"reading dense weight {t.name}: {error}")
            total += t.n_bytes
        return total

    # ---- running --------------------------------------------------------------------------------

    def counters(self) -> StreamCounters:
        raw = native.WbStreamCounters()
        self._lib.wb_streamer_counters(self._ptr, ctypes.byref(raw))
        values = {name: getattr(raw, name) for name, _ in native.WbStreamCounters._fields_}
        values["o_direct"] = bool(values["o_direct"])
        return StreamCounters(**values)

    def dense_resident_frac(self) -> float:
        """Share of the dense weights' pages in RAM (mincore); -1 when it cannot be measured."""
        return float(self._lib.wb_streamer_dense_resident_frac(self._ptr))

    def set_budget(self, budget_bytes: int) -> None:
        self._check(self._lib.wb_streamer_set_budget(self._ptr, budget_bytes), "resizing the cache")

    def set_phase(self, phase: Phase) -> None:
        """What the next decodes are (dropping is armed for decodes; records carry it)."""
        self._lib.wb_streamer_set_phase(self._ptr, int(phase))

    def set_position(self, position: int) -> None:
        """Context position of the next decode call's first token (route records' first_step);
        the native side advances it over the call's compute batches. -1: unknown."""
        self._lib.wb_streamer_set_position(self._ptr, position)

    def take_routes(self) -> list[RouteLoad]:
        """The routing of every layer load since the last call (needs trace=True), in order.

        `first_step` is the context position of the load's first token as last set with
        `set_position` (the session sets it per prefill chunk and at the generation's start), -1
        where unattributable (a load that routed no token, or no position was set)."""
        n_loads, n_slots = ctypes.c_uint64(), ctypes.c_uint64()
        self._check(self._lib.wb_streamer_routes_pending(self._ptr, ctypes.byref(n_loads),
                                                         ctypes.byref(n_slots)), "reading routes")
        loads = (native.WbRouteLoad * max(1, n_loads.value))()
        experts = np.empty(n_slots.value, dtype=np.int32)
        weights = np.empty(n_slots.value, dtype=np.float32)
        residency = np.empty(n_slots.value, dtype=np.int8)
        dropped = np.empty(n_slots.value, dtype=np.uint8)
        self._check(self._lib.wb_streamer_take_routes(
            self._ptr, loads, n_loads.value, experts.ctypes.data, weights.ctypes.data,
            residency.ctypes.data, dropped.ctypes.data, n_slots.value), "reading routes")
        n_scores = ctypes.c_uint64()
        self._check(self._lib.wb_streamer_route_scores_pending(self._ptr, ctypes.byref(n_scores)),
                    "reading route scores")
        scores = np.empty(n_scores.value, dtype=np.float32)
        self._check(self._lib.wb_streamer_take_route_scores(self._ptr, scores.ctypes.data,
                                                            n_scores.value), "reading route scores")
        out: list[RouteLoad] = []
        at = at_score = 0
        for rec in loads[: n_loads.value]:
            n = rec.n_tokens * rec.k
            shape = (rec.n_tokens, rec.k)
            row_scores = None
            if rec.n_scores > 0:
                m = rec.n_tokens * rec.n_scores
                row_scores = scores[at_score: at_score + m].reshape(rec.n_tokens, rec.n_scores)
                at_score += m
            out.append(RouteLoad(
                layer=rec.layer, phase=Phase(rec.phase), first_step=rec.first_step,
                experts=experts[at: at + n].reshape(shape),
                weights=weights[at: at + n].reshape(shape),
                residency=residency[at: at + n].reshape(shape),
                dropped=dropped[at: at + n].reshape(shape).view(np.bool_), scores=row_scores))
            at += n
        return out

    def layer_experts(self) -> np.ndarray:
        """Experts the streamer manages per layer index (0 for a dense layer), up to the last
        MoE layer; empty before the capture."""
        n = self._lib.wb_streamer_layer_experts(self._ptr, None, 0)
        out = np.zeros(max(n, 0), dtype=np.int64)
        if n > 0:
            got = self._lib.wb_streamer_layer_experts(
                self._ptr, out.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), n)
            if got != n:
                raise StreamerError(f"reading the streamed layers: {native.last_error(self._lib)}")
        return out

    def expert_map(self, n_layer: int = 0, n_expert: int = 0) -> ExpertMapSnapshot:
        """Cumulative routed counts and cache residency per (layer, expert): two copies of
        n_layer x n_expert cells. The shape is at least what the streamer manages; pass the
        model's n_layer so that trailing dense layers get their (empty) rows too."""
        layers = self._layer_experts if self._layer_experts is not None else self.layer_experts()
        rows = max(n_layer, len(layers))
        cols = max(n_expert, int(layers.max()) if len(layers) else 0)
        routed = np.empty((rows, cols), dtype=np.uint32)
        resident = np.empty((rows, cols), dtype=np.uint8)
        self._check(
            self._lib.wb_streamer_expert_map(self._ptr, rows, cols, routed.ctypes.data,
                                             resident.ctypes.data),
            "reading the expert map",
        )
        per_layer = self._per_layer
        if per_layer is None or len(per_layer) != rows or self._layer_experts is None:
            per_layer = np.zeros(rows, dtype=np.int64)
            per_layer[: len(layers)] = layers
            per_layer.flags.writeable = False  # shared by every snapshot of this shape
            self._per_layer = per_layer
        return ExpertMapSnapshot(routed=routed, resident=resident.view(np.bool_),
                                 layer_experts=per_layer, cached=self._cached)

    def substituted_map(self, n_layer: int, n_expert: int) -> np.ndarray:
        """(n_layer, n_expert) uint32: how many times substitution brought each expert into a
        row's set since activation (the expert map marks these cells)."""
        out = np.zeros((n_layer, n_expert), dtype=np.uint32)
        self._check(self._lib.wb_streamer_substituted_map(self._ptr, n_layer, n_expert,
                                                          out.ctypes.data),
                    "reading the substituted map")
        return out

    # ---- cache policy, warm start ---------------------------------------------------------------

    def set_cache_policy(self, policy: str, guard: bool) -> None:
        if policy not in POLICY_CODES:
            raise StreamerError(f"unknown cache policy {policy!r}: choose one of "
                                f"{', '.join(POLICY_CODES)}")
        self._check(self._lib.wb_streamer_set_cache_policy(self._ptr, POLICY_CODES[policy],
                                                           int(guard)), "setting the policy")

    def set_prefetch(self, on: bool) -> None:
        """Read the next layer's likely experts ahead (after activate; needs the cache)."""
        self._check(self._lib.wb_streamer_set_prefetch(self._ptr, int(on)), "turning on prefetch")

    def cache_stats(self) -> CacheStats:
        raw = native.WbCacheStats()
        self._check(self._lib.wb_streamer_cache_stats(self._ptr, ctypes.byref(raw)),
                    "reading the cache stats")
        values = {name: getattr(raw, name) for name, _ in native.WbCacheStats._fields_}
        for flag in ("guard", "guard_active", "prefetch"):
            values[flag] = bool(values[flag])
        return CacheStats(**values)

    def preload(self, entries: list[tuple[int, int]]) -> int:
        """Reads (layer, expert) entries in order while they fit in the budget (warm start);
        returns how many were read."""
        layers = np.array([e[0] for e in entries], dtype=np.int32)
        experts = np.array([e[1] for e in entries], dtype=np.int32)
        n = self._lib.wb_streamer_preload(self._ptr, layers.ctypes.data, experts.ctypes.data,
                                          len(entries))
        if n < 0:
            raise StreamerError(f"preloading experts: {native.last_error(self._lib)}")
        return int(n)

    def entry_states(self, n_layer: int, n_expert: int) -> np.ndarray:
        """(n_layer, n_expert) uint8: ENTRY_ABSENT, _RESIDENT, _TRANSIENT (the guard's) or
        _AHEAD (preloaded or prefetched, not yet looked up)."""
        out = np.zeros((n_layer, n_expert), dtype=np.uint8)
        self._check(self._lib.wb_streamer_entry_states(self._ptr, n_layer, n_expert,
                                                       out.ctypes.data), "reading entry states")
        return out

    def fatal(self) -> str:
        buf = ctypes.create_string_buffer(1024)
        self._lib.wb_streamer_fatal(self._ptr, buf, len(buf))
        return buf.value.decode()

    @property
    def is_open(self) -> bool:
        return self._ptr is not None

    def close(self) -> None:
        """Free the streamer; only after the context that calls into it is freed."""
        if self._ptr:
            self._lib.wb_streamer_free(self._ptr)
            self._ptr = None

    def _check(self, ret: int, what: str) -> None:
        if ret != 0:
            raise StreamerError(f"{what}: {native.last_error(self._lib) or 'unknown error'}")

