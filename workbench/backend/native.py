"""ctypes binding of the native library (native/include/workbench_native.h).

The only module that loads `libworkbench_native.so`. It binds just what the library exports,
typed, and checks at load that the library was built for the libllama this process runs: same
llama-cpp-python release, same libllama bytes, same struct layouts. A mismatch refuses to start
with a message that says how to rebuild, because a native callback compiled against other
headers would read the wrong struct offsets and fail silently.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from workbench.backend import llama as llama_binding
from workbench.paths import native_library_path

ABI_VERSION = 6
REBUILD_HINT = ("In a source checkout, run scripts/test or scripts/workbench once: set-up rebuilds "
                "the native library; an installed package was built for another llama-cpp-python "
                "build: reinstall both together (pip install --force-reinstall workbench).")


class NativeLibraryError(RuntimeError):
    """The native library is missing, stale, or was built for another libllama."""


@dataclass(frozen=True, slots=True)
class BuildIdentity:
    llama_cpp_python_version: str
    libllama_sha256: str
    loaded_libllama_path: str


def library_path() -> Path:
    override = os.environ.get("WORKBENCH_NATIVE_LIB")
    return Path(override) if override else native_library_path()


class WbStreamerParams(ctypes.Structure):
    """Mirror of `struct wb_streamer_params`."""

    _fields_ = [
        ("io_lanes", ctypes.c_int32),
        ("o_direct", ctypes.c_int32),
        ("cache_budget_bytes", ctypes.c_int64),
        ("trace", ctypes.c_int32),
        ("drop_frac", ctypes.c_float),
        ("drop_renorm", ctypes.c_int32),
        ("drop_prefill", ctypes.c_int32),
        ("debug_flags", ctypes.c_int32),
        ("substitute_margin", ctypes.c_float),
        ("substitute_prefill", ctypes.c_int32),
        ("trace_scores", ctypes.c_int32),
    ]


class WbStreamCounters(ctypes.Structure):
    """Mirror of `struct wb_stream_counters` (times in ns, sizes in bytes)."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "read_bytes", "requested_bytes", "io_ns", "mgmt_ns", "loads", "lookups", "hits",
            "routed", "evictions", "rereads", "resident_now", "budget_now", "token_demand",
            "layer_demand", "resizes", "experts_routed", "experts_dropped",
        )
    ] + [("o_direct", ctypes.c_int32), ("lanes", ctypes.c_int32),
         ("decode_dropped_weight", ctypes.c_double), ("decode_weight", ctypes.c_double),
         ("experts_reranked", ctypes.c_uint64), ("experts_substituted", ctypes.c_uint64)]


class WbRouteLoad(ctypes.Structure):
    """Mirror of `struct wb_route_load`."""

    _fields_ = [(name, ctypes.c_int32)
                for name in ("layer", "phase", "n_tokens", "k", "first_step", "n_scores")]


class WbCacheStats(ctypes.Structure):
    """Mirror of `struct wb_cache_stats` (cache policies, warm start, prefetch)."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "transient_admissions", "preloaded_entries", "preloaded_bytes",
            "preload_read_bytes", "preload_ns", "preload_hits", "preload_unused",
            "prefetch_issued", "prefetch_bytes", "prefetch_hits", "prefetch_wasted_bytes",
            "prefetch_wait_ns", "prefetch_hit_bytes", "prefetch_read_ns",
        )
    ] + [(name, ctypes.c_int32) for name in ("policy", "guard", "guard_active", "prefetch")]


# The native library's own structs, checked by size at load like llama.h's.
NATIVE_STRUCTS: dict[str, type[ctypes.Structure]] = {
    "streamer_params": WbStreamerParams,
    "stream_counters": WbStreamCounters,
    "route_load": WbRouteLoad,
    "cache_stats": WbCacheStats,
}


class WbLeanRange(ctypes.Structure):
    """Mirror of `struct wb_lean_range`."""

    _fields_ = [("file", ctypes.c_int32), ("offset", ctypes.c_uint64), ("nbytes", ctypes.c_uint64)]


class WbLeanLoadStats(ctypes.Structure):
    """Mirror of `struct wb_lean_load_stats`."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in ("populate_stripped", "file_maps", "file_map_bytes", "blanked_bytes",
                     "blank_failures", "willneed_narrowed", "willneed_bytes",
                     "willneed_skipped_bytes")
    ]


def _bind(lib: ctypes.CDLL) -> None:
    c = ctypes
    signatures: dict[str, tuple[list[type], type | None]] = {
        "wb_abi_version": ([], c.c_int32),
        "wb_last_error": ([], c.c_char_p),
        "wb_build_llama_cpp_python_version": ([c.c_char_p, c.c_size_t], c.c_int32),
        "wb_build_libllama_sha256": ([c.c_char_p, c.c_size_t], c.c_int32),
        "wb_loaded_libllama_path": ([c.c_char_p, c.c_size_t], c.c_int32),
        "wb_sizeof_llama_context_params": ([], c.c_size_t),
        "wb_sizeof_llama_model_params": ([], c.c_size_t),
        "wb_sizeof_llama_batch": ([], c.c_size_t),
        **{f"wb_sizeof_{name}": ([], c.c_size_t) for name in NATIVE_STRUCTS},
        "wb_abort_flag_new": ([], c.c_void_p),
        "wb_abort_flag_free": ([c.c_void_p], None),
        "wb_abort_flag_set": ([c.c_void_p, c.c_int32], None),
        "wb_abort_flag_get": ([c.c_void_p], c.c_int32),
        "wb_abort_flag_polls": ([c.c_void_p], c.c_uint64),
        "wb_abort_install": ([c.c_void_p, c.c_void_p], c.c_int32),
        "wb_abort_flag_set_fatal": ([c.c_void_p, c.c_int32], None),
        "wb_abort_flag_get_fatal": ([c.c_void_p], c.c_int32),
        "wb_streamer_new": ([c.POINTER(c.c_char_p), c.c_int32, WbStreamerParams], c.c_void_p),
        "wb_streamer_free": ([c.c_void_p], None),
        "wb_streamer_capture_begin": ([c.c_void_p], c.c_int32),
        "wb_streamer_capture_end": ([c.c_void_p], c.c_int32),
        "wb_streamer_captured_experts": ([c.c_void_p, c.c_char_p, c.c_size_t], c.c_int32),
        "wb_streamer_bind_expert": (
            [c.c_void_p, c.c_char_p, c.c_int32, c.c_uint64, c.c_uint64, c.c_int64], c.c_int32),
        "wb_streamer_activate": ([c.c_void_p], c.c_int32),
        "wb_streamer_dense_anon": (
            [c.c_void_p, c.c_char_p, c.c_int32, c.c_uint64, c.c_uint64], c.c_int32),
        "wb_streamer_set_budget": ([c.c_void_p, c.c_int64], c.c_int32),
        "wb_streamer_set_phase": ([c.c_void_p, c.c_int32], None),
        "wb_streamer_set_position": ([c.c_void_p, c.c_int64], None),
        "wb_streamer_routes_pending": (
            [c.c_void_p, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64)], c.c_int32),
        "wb_streamer_take_routes": (
            [c.c_void_p, c.POINTER(WbRouteLoad), c.c_uint64, c.c_void_p, c.c_void_p, c.c_void_p,
             c.c_void_p, c.c_uint64], c.c_int32),
        "wb_streamer_route_scores_pending": ([c.c_void_p, c.POINTER(c.c_uint64)], c.c_int32),
        "wb_streamer_take_route_scores": ([c.c_void_p, c.c_void_p, c.c_uint64], c.c_int32),
        "wb_streamer_dense_resident_frac": ([c.c_void_p], c.c_double),
        "wb_drop_row": ([c.c_int64, c.c_void_p, c.c_void_p, c.c_void_p, c.c_float, c.c_int32,
                         c.c_int32, c.c_void_p, c.POINTER(c.c_double), c.POINTER(c.c_double)],
                        c.c_int32),
        "wb_substitute_row": ([c.c_int64, c.c_void_p, c.c_void_p, c.c_float, c.c_int64,
                               c.c_void_p], c.c_int32),
        "wb_streamer_substituted_map": ([c.c_void_p, c.c_int32, c.c_int32, c.c_void_p],
                                        c.c_int32),
        "wb_streamer_counters": ([c.c_void_p, c.POINTER(WbStreamCounters)], None),
        "wb_streamer_layer_experts": ([c.c_void_p, c.POINTER(c.c_int64), c.c_int32], c.c_int32),
        "wb_streamer_expert_map": ([c.c_void_p, c.c_int32, c.c_int32, c.c_void_p, c.c_void_p],
                                   c.c_int32),
        "wb_streamer_set_cache_policy": ([c.c_void_p, c.c_int32, c.c_int32], c.c_int32),
        "wb_streamer_set_prefetch": ([c.c_void_p, c.c_int32], c.c_int32),
        "wb_streamer_cache_stats": ([c.c_void_p, c.POINTER(WbCacheStats)], c.c_int32),
        "wb_streamer_preload": ([c.c_void_p, c.c_void_p, c.c_void_p, c.c_uint64], c.c_int32),
        "wb_streamer_entry_states": ([c.c_void_p, c.c_int32, c.c_int32, c.c_void_p],
                                     c.c_int32),
        "wb_streamer_set_abort_flag": ([c.c_void_p, c.c_void_p], None),
        "wb_streamer_fatal": ([c.c_void_p, c.c_char_p, c.c_size_t], c.c_int32),
        "wb_lean_load_begin": ([c.POINTER(c.c_char_p), c.c_int32, c.POINTER(WbLeanRange),
                                c.c_uint64], c.c_int32),
        "wb_lean_load_end": ([c.POINTER(WbLeanLoadStats), c.POINTER(c.c_uint64), c.c_int32],
                             c.c_int32),
        "wb_lean_load_restore": ([c.c_char_p, c.c_uint64, c.c_uint64, c.c_uint64], c.c_int64),
        "wb_lean_load_patched": ([], c.c_int32),
        "wb_iobench": ([c.c_char_p, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64), c.c_uint64,
                        c.c_int32, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64)], c.c_int32),
    }
    for name, (argtypes, restype) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype


def _string(lib: ctypes.CDLL, fn_name: str) -> str:
    fn = getattr(lib, fn_name)
    buf = ctypes.create_string_buffer(512)
    n = fn(buf, len(buf))
    if n < 0:
        raise NativeLibraryError(f"{fn_name} failed: {last_error(lib)}")
    return buf.value.decode()


def last_error(lib: ctypes.CDLL) -> str:
    raw = lib.wb_last_error()
    return raw.decode() if raw else ""


def check(ret: int, lib: ctypes.CDLL, what: str) -> None:
    if ret != 0:
        raise NativeLibraryError(f"{what} failed: {last_error(lib) or 'no reason given'}")


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@cache
def load() -> ctypes.CDLL:
    """Load, bind and verify the native library (once per process)."""
    path = library_path()
    if not path.exists():
        raise NativeLibraryError(f"the native library {path} does not exist. {REBUILD_HINT}")
    # libllama must already be in the process (loaded by llama-cpp-python) so that the loader
    # binds us to that very copy rather than resolving another through our rpath.
    llama_lib_path = llama_binding.libllama_path()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise NativeLibraryError(f"cannot load {path}: {exc}. {REBUILD_HINT}") from exc
    try:
        _bind(lib)
    except AttributeError as exc:
        raise NativeLibraryError(
            f"{path} lacks an expected symbol ({exc}). {REBUILD_HINT}"
        ) from exc
    verify_identity(lib, llama_lib_path)
    return lib


def identity(lib: ctypes.CDLL) -> BuildIdentity:
    return BuildIdentity(
        llama_cpp_python_version=_string(lib, "wb_build_llama_cpp_python_version"),
        libllama_sha256=_string(lib, "wb_build_libllama_sha256"),
        loaded_libllama_path=_string(lib, "wb_loaded_libllama_path"),
    )


def verify_identity(lib: ctypes.CDLL, running_libllama: Path) -> None:
    """Refuse a native library that was not built for the libllama this process runs."""
    problems: list[str] = []
    abi = lib.wb_abi_version()
    if abi != ABI_VERSION:
        problems.append(f"its ABI version is {abi}, the Python side expects {ABI_VERSION}")
    ident = identity(lib)
    running_version = llama_binding.llama_cpp_python_version()
    if ident.llama_cpp_python_version != running_version:
        problems.append(
            f"it was compiled against llama-cpp-python {ident.llama_cpp_python_version} headers, "
            f"but {running_version} is installed"
        )
    if Path(ident.loaded_libllama_path).resolve() != running_libllama.resolve():
        problems.append(
            f"it is bound to {ident.loaded_libllama_path}, not to {running_libllama} which "
            "llama-cpp-python loaded"
        )
    running_sha = sha256_file(running_libllama)
    if ident.libllama_sha256 != running_sha:
        problems.append(
            f"it was linked to a libllama with SHA-256 {ident.libllama_sha256[:12]}..., the "
            f"running one has {running_sha[:12]}..."
        )
    expected_sizes = llama_binding.struct_sizes()
    actual_sizes = {
        "llama_context_params": lib.wb_sizeof_llama_context_params(),
        "llama_model_params": lib.wb_sizeof_llama_model_params(),
        "llama_batch": lib.wb_sizeof_llama_batch(),
    }
    for name, size in actual_sizes.items():
        if expected_sizes[name] != size:
            problems.append(
                f"sizeof({name}) is {size} in C but {expected_sizes[name]} in llama-cpp-python"
            )
    for name, mirror in NATIVE_STRUCTS.items():
        size = getattr(lib, f"wb_sizeof_{name}")()
        if size != ctypes.sizeof(mirror):
            problems.append(
                f"sizeof(wb_{name}) is {size} in C but {ctypes.sizeof(mirror)} in the ctypes "
                "mirror in workbench/backend/native.py (the header changed without the binding, "
                "or the "
                "library is stale)"
            )
    if problems:
        raise NativeLibraryError(
            "the native library does not match the running llama.cpp: "
            + "; ".join(problems)
            + f". {REBUILD_HINT}"
        )


def iobench(path: str, ranges: list[tuple[int, int]], *, lanes: int) -> float:
    """Bandwidth in bytes/s of O_DIRECT preads of `ranges` (offset, size) on `lanes` threads."""
    lib = load()
    n = len(ranges)
    offsets = (ctypes.c_uint64 * n)(*[r[0] for r in ranges])
    sizes = (ctypes.c_uint64 * n)(*[r[1] for r in ranges])
    got, ns = ctypes.c_uint64(), ctypes.c_uint64()
    check(lib.wb_iobench(os.fsencode(path), offsets, sizes, n, lanes, ctypes.byref(got),
                         ctypes.byref(ns)), lib, "the O_DIRECT read benchmark")
    return got.value / (ns.value / 1e9)
