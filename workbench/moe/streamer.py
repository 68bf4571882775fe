"""The expert streamer's control plane: a typed wrapper over the native streamer.

The per-node work (isolating `ffn_moe_topk-<il>`, reading the routed slices, the LRU cache) runs
in C++ inside llama.cpp's eval callback; nothing here runs per node or per token except
`counters()`, which the session reads after each decode, outside the timed bracket.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from workbench.moe import native
from workbench.moe.layout import ExpertTensor, TensorInfo


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
    o_direct: bool
    lanes: int

    @property
    def hit_pct(self) -> float:
        """Cumulative hit rate since the cache was created; -1 with no lookups."""
        return 100.0 * self.hits / self.lookups if self.lookups else -1.0


class StreamerError(RuntimeError):
    """The streamer could not be set up or failed while reading; the message says why."""


class ExpertStreamer:
    """One model's expert streamer. Create, capture, bind, activate; then decode as usual."""

    def __init__(self, shards: list[Path], *, lanes: int, o_direct: bool, budget_bytes: int,
                 trace: bool = False) -> None:
        self._lib = native.load()
        paths = (ctypes.c_char_p * len(shards))(*[str(p).encode() for p in shards])
        params = native.StreamerParams(lanes, int(o_direct), budget_bytes, int(trace))
        ptr = self._lib.wb_streamer_new(paths, len(shards), params)
        if not ptr:
            reason = native.last_error(self._lib)
            raise StreamerError(f"cannot open the model for streaming: {reason}")
        self._ptr: int | None = ptr
        self._shard_index = {str(p): i for i, p in enumerate(shards)}

    # ---- wiring into llama.cpp ----------------------------------------------------------------

    @property
    def eval_callback(self) -> tuple[int, int]:
        """(function address, user data) for llama_context_params.cb_eval."""
        address = ctypes.cast(self._lib.wb_streamer_eval, ctypes.c_void_p).value
        assert address is not None and self._ptr is not None
        return address, self._ptr

    def attach_abort_flag(self, flag: native.AbortFlag) -> None:
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

    def read_dense_into_memory(self, tensors: list[TensorInfo], expert_names: set[str]) -> int:
        """The `anon` dense policy: every non-expert weight the graph uses, read once into
        private memory (the kernel cannot evict it under pressure). Returns bytes read."""
        total = 0
        for t in tensors:
            if t.name in expert_names:
                continue
            ret = self._lib.wb_streamer_dense_anon(self._ptr, t.name.encode(), t.shard, t.offset,
                                                   t.n_bytes)
            if ret != 0:
                error = native.last_error(self._lib)
                if "was not captured" in error:
                    continue  # a GGUF tensor this graph never uses
                raise StreamerError(f"reading dense weight {t.name}: {error}")
            total += t.n_bytes
        return total

    # ---- running --------------------------------------------------------------------------------

    def counters(self) -> StreamCounters:
        raw = native.StreamCounters()
        self._lib.wb_streamer_counters(self._ptr, ctypes.byref(raw))
        values = {name: getattr(raw, name) for name, _ in native.StreamCounters._fields_}
        values["o_direct"] = bool(values["o_direct"])
        return StreamCounters(**values)

    def dense_resident_frac(self) -> float:
        """Share of the dense weights' pages in RAM (mincore); -1 when it cannot be measured."""
        return float(self._lib.wb_streamer_dense_resident_frac(self._ptr))

    def set_budget(self, budget_bytes: int) -> None:
        self._check(self._lib.wb_streamer_set_budget(self._ptr, budget_bytes), "resizing the cache")

    def take_trace(self) -> list[tuple[int, list[int]]]:
        """Routed (layer, unique expert ids) per load since the last call (needs trace=True)."""
        out: list[int] = []
        buf = (ctypes.c_int32 * 65536)()
        while True:
            n = self._lib.wb_streamer_take_trace(self._ptr, buf, len(buf))
            if n <= 0:
                break
            out.extend(buf[:n])
        loads: list[tuple[int, list[int]]] = []
        i = 0
        while i < len(out):
            layer, k = out[i], out[i + 1]
            loads.append((layer, out[i + 2: i + 2 + k]))
            i += 2 + k
        return loads

    def fatal(self) -> str:
        buf = ctypes.create_string_buffer(1024)
        self._lib.wb_streamer_fatal(self._ptr, buf, len(buf))
        return buf.value.decode()

    def close(self) -> None:
        """Free the streamer; only after the context that calls into it is freed."""
        if self._ptr:
            self._lib.wb_streamer_free(self._ptr)
            self._ptr = None

    def _check(self, ret: int, what: str) -> None:
        if ret != 0:
            raise StreamerError(f"{what}: {native.last_error(self._lib) or 'unknown error'}")
