"""The one module that imports `llama_cpp`: a narrow, typed wrapper over its low-level API.

Why the low-level API: the high-level `Llama` class exposes neither `use_extra_bufts` (weight
repacking must be off: it crashes on AMX CPUs and would break expert streaming) nor `cb_eval`.
Ownership is explicit: every native object has a `close()` that is idempotent and frees in the
right order; nothing relies on `__del__`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import llama_cpp.llama_cpp as ll
import numpy as np

log = logging.getLogger("workbench.llama")

DECODE_OK = 0
DECODE_NO_KV_SLOT = 1
DECODE_ABORTED = 2


class LlamaError(RuntimeError):
    """A llama.cpp call failed; the message says what and what to do."""


@dataclass(frozen=True, slots=True)
class ModelParams:
    use_mmap: bool = True
    # Repacking off: it crashes in ggml_backend_amx_mul_mat on AMX CPUs, and the streamer needs
    # tensors in their native GGUF layout.
    use_extra_bufts: bool = False
    kv_overrides_int: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ContextParams:
    n_ctx: int
    n_batch: int
    n_ubatch: int  # 0 follows n_batch
    n_threads: int
    # A native eval callback (function address, user data): called by llama.cpp per graph node,
    # so it must never be Python.
    eval_callback: tuple[int, int] | None = None


def llama_cpp_python_version() -> str:
    return str(llama_cpp.__version__)


def libllama_path() -> Path:
    """The libllama shared library this process loaded through llama-cpp-python."""
    return Path(ll._lib._name).resolve()


def struct_sizes() -> dict[str, int]:
    """ctypes sizes of the structs the native library also sees (checked at its load)."""
    return {
        "llama_context_params": ctypes.sizeof(ll.llama_context_params),
        "llama_model_params": ctypes.sizeof(ll.llama_model_params),
        "llama_batch": ctypes.sizeof(ll.llama_batch),
    }


_backend_lock = threading.Lock()
_backend_ready = False


@ll.llama_log_callback
def _log_callback(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    # Routed into logging instead of stderr; llama.cpp logs rarely once a model is loaded, so
    # this Python callback never sits on the per-token path.
    message = text.decode("utf-8", errors="replace").rstrip()
    if not message:
        return
    if level == _GGML_LOG_LEVEL_ERROR and _ABORTED.search(message):
        # A requested stop surfaces as errors in llama.cpp's log (status 1 = GGML_STATUS_ABORTED,
        # llama_decode 2 = aborted); the session reports the stop itself.
        log.debug(message)
        return
    log.log(_LOG_LEVELS.get(level, logging.DEBUG), message)
    if level == _GGML_LOG_LEVEL_ERROR:
        _recent_errors.append(message)


_ABORTED = re.compile(r"(failed with error 1|compute status: 1|failed to decode, ret = 2)$")


_GGML_LOG_LEVEL_ERROR = 4
_recent_errors: deque[str] = deque(maxlen=8)


def recent_errors() -> list[str]:
    """The last error lines llama.cpp logged (to explain a failed load in plain words)."""
    return list(_recent_errors)


# ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
_LOG_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}


def log_callback() -> object:
    """The callback llama.cpp logs through (libmtmd is pointed at it too: one log)."""
    return _log_callback


def ensure_backend() -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            ll.llama_log_set(_log_callback, ctypes.c_void_p(0))
            ll.llama_backend_init()
            _backend_ready = True


class Model:
    """A loaded GGUF model and its vocabulary."""

    def __init__(
        self,
        path: str | Path,
        params: ModelParams,
        progress: Callable[[float], bool] | None = None,
    ) -> None:
        ensure_backend()
        self.path = Path(path)
        mp = ll.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.load_mode = ll.LLAMA_LOAD_MODE_MMAP if params.use_mmap else ll.LLAMA_LOAD_MODE_NONE
        mp.use_extra_bufts = params.use_extra_bufts
        self._overrides = _kv_overrides(params.kv_overrides_int)
        if self._overrides is not None:
            mp.kv_overrides = self._overrides
        self._progress_cb = None
        if progress is not None:
            # Called a few hundred times during load; returning False cancels the load.
            self._progress_cb = ll.llama_progress_callback(lambda p, _d: bool(progress(float(p))))
            mp.progress_callback = self._progress_cb
        # fsencode: a path is bytes to the OS; one that is not UTF-8 must reach it unchanged.
        ptr = ll.llama_model_load_from_file(os.fsencode(self.path), mp)
        if not ptr:
            raise LlamaError(f"llama.cpp could not load {self.path}")
        self.ptr: int | None = ptr
        self.vocab = ll.llama_model_get_vocab(ptr)
        self.n_vocab = int(ll.llama_vocab_n_tokens(self.vocab))
        self.n_ctx_train = int(ll.llama_model_n_ctx_train(ptr))
        self.n_layer = int(ll.llama_model_n_layer(ptr))
        self.n_params = int(ll.llama_model_n_params(ptr))
        self.size_bytes = int(ll.llama_model_size(ptr))
        self.bos = int(ll.llama_vocab_bos(self.vocab))
        self.eos = int(ll.llama_vocab_eos(self.vocab))
        self.add_bos = bool(ll.llama_vocab_get_add_bos(self.vocab))
        self._piece_buf = ctypes.create_string_buffer(256)
        # A token's piece and end-of-generation flag never change while the vocabulary is
        # loaded: the decode loop asks once per token, so each is asked of llama.cpp once per
        # distinct token (a ctypes call and a buffer copy cost ~20 us, a dict lookup ~0.1).
        self._pieces: dict[tuple[int, bool], bytes] = {}
        self._eog: dict[int, bool] = {}

    def close(self) -> None:
        if self.ptr:
            ll.llama_model_free(self.ptr)
            self.ptr = None

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = ll.llama_model_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):  # long values (chat templates): ask again with room for all of it
            buf = ctypes.create_string_buffer(n + 1)
            ll.llama_model_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace")

    def chat_template(self) -> str | None:
        raw = ll.llama_model_chat_template(self.ptr, None)
        return raw.decode("utf-8", errors="replace") if raw else None

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        while True:
            buf = (ll.llama_token * capacity)()
            n = ll.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_special,
                                  parse_special)
            if n >= 0:
                return list(buf[:n])
            capacity = -n

    def token_to_piece(self, token: int, *, special: bool = True) -> bytes:
        piece = self._pieces.get((token, special))
        if piece is None:
            piece = self._pieces[(token, special)] = self._ask_piece(token, special)
        return piece

    def _ask_piece(self, token: int, special: bool) -> bytes:
        buf = self._piece_buf
        n = ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = ll.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        return ctypes.string_at(buf, n)

    def token_text(self, token: int) -> str:
        raw = ll.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def is_eog(self, token: int) -> bool:
        eog = self._eog.get(token)
        if eog is None:
            eog = self._eog[token] = bool(ll.llama_vocab_is_eog(self.vocab, token))
        return eog

    def vocab_texts(self) -> list[bytes]:
        """Every token's text, by id (a draft model must have exactly these)."""
        return [ll.llama_vocab_get_text(self.vocab, t) or b"" for t in range(self.n_vocab)]


def _kv_overrides(items: Sequence[tuple[str, int]]) -> ctypes.Array | None:
    if not items:
        return None
    arr = (ll.llama_model_kv_override * (len(items) + 1))()  # zeroed entry terminates the list
    for i, (key, value) in enumerate(items):
        arr[i].key = key.encode()
        arr[i].tag = ll.LLAMA_KV_OVERRIDE_TYPE_INT
        arr[i].value.val_i64 = value
    return arr


_UINT32_MAX = 2**32 - 1
GGML_MAX_N_THREADS = 512  # ggml.h: the most threads one compute graph can run on


def _check_c_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise LlamaError(f"{name}={value} is outside what llama.cpp accepts ({low} to {high})")


class Context:
    """A decoding context: the KV memory, the logits, and the threads that compute."""

    def __init__(self, model: Model, params: ContextParams) -> None:
        # Checked again here, whatever validated the settings before: ctypes truncates a number
        # that does not fit its C field instead of refusing it (2**32 + 16 tokens became 16).
        _check_c_range("n_ctx", params.n_ctx, 1, _UINT32_MAX)
        _check_c_range("n_batch", params.n_batch, 1, _UINT32_MAX)
        _check_c_range("n_ubatch", params.n_ubatch, 0, _UINT32_MAX)
        _check_c_range("n_threads", params.n_threads, 1, GGML_MAX_N_THREADS)
        cp = ll.llama_context_default_params()
        cp.n_ctx = params.n_ctx
        cp.n_batch = params.n_batch
        cp.n_ubatch = params.n_ubatch if params.n_ubatch > 0 else params.n_batch
        cp.n_seq_max = 1
        cp.n_threads = params.n_threads
        cp.n_threads_batch = params.n_threads
        cp.no_perf = True
        if params.eval_callback is not None:
            address, user_data = params.eval_callback
            cp.cb_eval = ll.ggml_backend_sched_eval_callback(address)
            cp.cb_eval_user_data = user_data
        ptr = ll.llama_init_from_model(model.ptr, cp)
        if not ptr:
            raise LlamaError(
                f"llama.cpp could not create a context of {params.n_ctx} tokens for {model.path}; "
                "try a smaller context size"
            )
        self.ptr: int | None = ptr
        self.model = model
        self.n_ctx = int(ll.llama_n_ctx(ptr))
        self.n_batch = int(ll.llama_n_batch(ptr))
        self.memory = ll.llama_get_memory(ptr)
        self._n_vocab = model.n_vocab
        self._one = (ll.llama_token * 1)()
        self._logits_view: np.ndarray | None = None  # logits(): the view, and where it points
        self._logits_at: int | None = None
        self._verify: ll.llama_batch | None = None  # the verify batch, made at its first use
        self._verify_cap = 0

    def close(self) -> None:
        if self._verify is not None:
            ll.llama_batch_free(self._verify)
            self._verify = None
        if self.ptr:
            ll.llama_free(self.ptr)
            self.ptr = None

    @property
    def n_threads(self) -> int:
        """The compute threads a decode runs on, as llama.cpp holds them."""
        return int(ll.llama_n_threads(self.ptr))

    def set_n_threads(self, n: int) -> None:
        """Run the next decodes (and prefills) on `n` compute threads, without a reload."""
        _check_c_range("n_threads", n, 1, GGML_MAX_N_THREADS)
        ll.llama_set_n_threads(self.ptr, n, n)

    def decode(self, tokens: Sequence[int]) -> int:
        """Decode a batch at the next positions; returns llama_decode's code (0 = success)."""
        if len(tokens) == 1:
            arr = self._one
            arr[0] = tokens[0]
        else:
            arr = (ll.llama_token * len(tokens))(*tokens)
        return int(ll.llama_decode(self.ptr, ll.llama_batch_get_one(arr, len(tokens))))

    def decode_one(self, token: int) -> int:
        """The per-token hot path: no allocation, one ctypes call into llama_decode."""
        self._one[0] = token
        return int(ll.llama_decode(self.ptr, ll.llama_batch_get_one(self._one, 1)))

    def decode_all_logits(self, tokens: Sequence[int]) -> int:
        """Decode `tokens` at the next positions with logits for every one of them (a
        speculative verify step: row i scores the token after tokens[i]). Returns
        llama_decode's code; read the rows with `argmax_ith` / `logits_ith`."""
        n = len(tokens)
        if n > self._verify_cap:
            if self._verify is not None:
                ll.llama_batch_free(self._verify)
            self._verify_cap = max(n, 16)
            self._verify = ll.llama_batch_init(self._verify_cap, 0, 1)
        batch = self._verify
        assert batch is not None
        start = self.pos_max() + 1
        for i, tok in enumerate(tokens):
            batch.token[i] = tok
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        batch.n_tokens = n
        return int(ll.llama_decode(self.ptr, batch))

    def logits_ith(self, i: int) -> np.ndarray:
        """A zero-copy view of the logits of output row `i` of the last decode."""
        ptr = ll.llama_get_logits_ith(self.ptr, i)
        if not ptr:
            raise LlamaError(f"the last decode has no logits for row {i}")
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))

    def argmax_ith(self, i: int) -> int:
        return int(np.argmax(self.logits_ith(i)))

    def logits(self) -> np.ndarray:
        """A zero-copy view of the last position's logits (valid until the next decode)."""
        ptr = ll.llama_get_logits_ith(self.ptr, -1)
        # The row sits at the same address token after token: the view (~10 us to build, a
        # share of the decode loop's own cost) is rebuilt only when the buffer moves.
        address = ctypes.cast(ptr, ctypes.c_void_p).value
        if address != self._logits_at or self._logits_view is None:
            self._logits_view = np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))
            self._logits_at = address
        return self._logits_view

    def argmax(self) -> int:
        return int(np.argmax(self.logits()))

    def seq_rm(self, p0: int, p1: int = -1) -> bool:
        """Remove positions [p0, p1) of sequence 0; False if the memory refuses to remove part."""
        return bool(ll.llama_memory_seq_rm(self.memory, 0, p0, p1))

    def clear(self) -> None:
        ll.llama_memory_clear(self.memory, True)

    def pos_max(self) -> int:
        return int(ll.llama_memory_seq_pos_max(self.memory, 0))

    def seq_state(self) -> bytes:
        """A copy of sequence 0's state (its KV cells and positions), to restore later."""
        size = int(ll.llama_state_seq_get_size(self.ptr, 0))
        buf = (ctypes.c_uint8 * size)()
        n = int(ll.llama_state_seq_get_data(self.ptr, buf, size, 0))
        if n <= 0 and size > 0:
            raise LlamaError("llama.cpp could not copy the sequence state")
        return ctypes.string_at(buf, n)

    def set_seq_state(self, data: bytes) -> bool:
        """Replace sequence 0's state with one from `seq_state()`; False if llama.cpp refused
        it (the memory is then cleared: half a state is never left behind)."""
        self.clear()
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(ll.llama_state_seq_set_data(self.ptr, buf, len(data), 0)) == 0:
            self.clear()
            return False
        return True


@dataclass(frozen=True, slots=True)
class Penalties:
    """llama.cpp's repetition penalties over the last `last_n` generated tokens."""

    last_n: int
    repeat: float = 1.0  # 1 is off
    presence: float = 0.0  # 0 is off
    frequency: float = 0.0  # 0 is off

    @property
    def active(self) -> bool:
        return self.last_n > 0 and (self.repeat != 1.0 or self.presence != 0.0
                                    or self.frequency != 0.0)


class Sampler:
    """The sampling chain: penalties (when on), then top-k, top-p, min-p, temperature and a
    seeded draw when temperature > 0, or the likeliest token (greedy) otherwise.

    Penalties come first, as in llama.cpp's own chain, so they reshape the scores every later
    step sees; with temperature 0 the chain is penalties + greedy, still reproducible.
    """

    def __init__(self, *, temp: float, top_k: int, top_p: float, seed: int,
                 min_p: float = 0.0, penalties: Penalties | None = None,
                 n_vocab: int = 0) -> None:
        params = ll.llama_sampler_chain_default_params()
        params.no_perf = True
        self.ptr: int | None = ll.llama_sampler_chain_init(params)
        if penalties is not None and penalties.active:
            ll.llama_sampler_chain_add(self.ptr, ll.llama_sampler_init_penalties(
                n_vocab, penalties.last_n, penalties.repeat, penalties.frequency,
                penalties.presence))
        if temp <= 0:
            ll.llama_sampler_chain_add(self.ptr, ll.llama_sampler_init_greedy())
            return
        if top_k > 0:
            ll.llama_sampler_chain_add(self.ptr, ll.llama_sampler_init_top_k(top_k))
        ll.llama_sampler_chain_add(self.ptr, ll.llama_sampler_init_top_p(top_p, 1))
        if min_p > 0:
            ll.llama_sampler_chain_add(self.ptr, ll.llama_sampler_init_min_p(min_p, 1))
        ll.llama_sampler_chain_add(self.ptr, ll.llama_sampler_init_temp(temp))
        ll.llama_sampler_chain_add(
            self.ptr, ll.llama_sampler_init_dist(seed if seed >= 0 else ll.LLAMA_DEFAULT_SEED)
        )

    def sample(self, ctx: Context) -> int:
        # llama_sampler_sample also accepts the token into the chain's state.
        return int(ll.llama_sampler_sample(self.ptr, ctx.ptr, -1))

    def reset(self) -> None:
        ll.llama_sampler_reset(self.ptr)

    def accept(self, tokens: Sequence[int]) -> None:
        """The chain sees `tokens` as if it had picked them (the penalties' window)."""
        for token in tokens:
            ll.llama_sampler_accept(self.ptr, token)

    def close(self) -> None:
        if self.ptr:
            ll.llama_sampler_free(self.ptr)
            self.ptr = None
