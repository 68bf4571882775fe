"""Per-conversation KV states: switching back to a conversation costs only its new turn.

The context holds one conversation's KV memory at a time (sequence 0). When another
conversation takes the context, the session copies the leaving one's sequence state
(`llama_state_seq_get_data`, ~14 ms for 2,000 tokens of gemma-3-270m) into this pool, with the
exact token mirror that makes prefix reuse safe; switching back copies it in again instead of
prefilling the whole history (~3 s for the same 2,000 tokens on two cores).

The contract (after the AnyLanguageModel change this follows, docs/architecture.md):
- keyed per conversation (its id in the store), never "the last prompt";
- bounded by a byte budget and a count; the least recently used goes first, to the disk spill
  when there is one (kv_spill.py);
- the conversation in the context holds its entry checked out: eviction skips it while others
  can go, and when only it is left over budget it is marked evicted and freed on release, never
  under a running decode;
- a pool belongs to one open session: any load-time change (model, config signature) opens a new
  session and so a new, empty pool; the disk spill checks the same identity on every read.

Qt-free, single-threaded: the session calls it on the engine thread only.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import psutil

from workbench.config import Config, signature
from workbench.engine.kv_spill import KvSpill, SpilledState, state_identity
from workbench.engine.metrics import RunInfo

log = logging.getLogger("workbench.kv_pool")

MAX_STATES = 32  # the count bound: past it the least recently used goes, whatever its size
Where = Literal["memory", "disk"]


@dataclass(slots=True, eq=False)
class PooledState:
    key: str  # the conversation's id in the store
    tokens: list[int]  # exactly the tokens the state holds, in order
    data: bytes | None  # the llama.cpp sequence state; None once freed
    last_used: int = 0
    checked_out: bool = False
    evicted: bool = False  # evicted while checked out: freed on release

    @property
    def nbytes(self) -> int:
        return len(self.data) if self.data is not None else 0


@dataclass(frozen=True, slots=True)
class HeldState:
    """One row of the pool's listing (the telemetry panel shows these)."""

    key: str
    n_tokens: int
    mib: float
    where: Where
    checked_out: bool = False


@dataclass
class KvPool:
    budget_bytes: int  # 0: nothing is kept in memory (the spill, if any, still takes states)
    spill: KvSpill | None = None
    max_states: int = MAX_STATES
    _states: dict[str, PooledState] = field(default_factory=dict)
    _clock: itertools.count = field(default_factory=itertools.count)

    # ---- the session's calls ----------------------------------------------------------------

    def put(self, key: str, tokens: list[int], data: bytes) -> None:
        """Keep a copy of `key`'s state (replacing and releasing any older one)."""
        old = self._states.pop(key, None)
        if old is not None:
            old.data = None
        self._states[key] = PooledState(key, list(tokens), data, next(self._clock))
        self._enforce_budget()

    def checkout(self, key: str) -> tuple[PooledState, Where] | None:
        """`key`'s state to restore, from memory or else from the disk spill, checked out until
        `release`; None when neither has a usable one (the turn then prefills)."""
        state = self._states.get(key)
        where: Where = "memory"
        if state is None or state.data is None:
            spilled = self.spill.load(key) if self.spill is not None else None
            if spilled is None:
                return None
            state = PooledState(key, spilled.tokens, spilled.data)
            self._states[key] = state
            where = "disk"
        state.checked_out = True
        state.last_used = next(self._clock)
        self._enforce_budget()
        return state, where

    def release(self, state: PooledState) -> None:
        """The conversation left the context (or the turn failed): its entry may go now."""
        state.checked_out = False
        if state.evicted:
            self._drop(state)

    def discard(self, key: str) -> None:
        """Forget `key` everywhere (a decode failure: nothing of its state can be trusted)."""
        state = self._states.pop(key, None)
        if state is not None:
            state.data = None
        if self.spill is not None:
            self.spill.delete(key)

    def forget(self, key: str) -> None:
        """The conversation was deleted: its state goes from memory and its files (of every
        model and setting) from the disk spill."""
        state = self._states.pop(key, None)
        if state is not None:
            state.data = None
        if self.spill is not None:
            self.spill.forget(key)

    def set_budget(self, budget_bytes: int) -> None:
        self.budget_bytes = max(0, budget_bytes)
        self._enforce_budget()

    def close(self) -> None:
        """Every state kept in memory goes to the disk spill (there is one per restart)."""
        for state in list(self._states.values()):
            self._drop(state)

    # ---- looking ------------------------------------------------------------------------------

    def get(self, key: str) -> PooledState | None:
        return self._states.get(key)

    def listing(self) -> list[HeldState]:
        held = [HeldState(s.key, len(s.tokens), s.nbytes / (1 << 20), "memory", s.checked_out)
                for s in sorted(self._states.values(), key=lambda s: -s.last_used)]
        if self.spill is not None:
            in_memory = set(self._states)
            held += [HeldState(f.key, f.n_tokens, f.nbytes / (1 << 20), "disk")
                     for f in self.spill.listing() if f.key not in in_memory]
        return held

    # ---- eviction -----------------------------------------------------------------------------

    def _over(self) -> bool:
        live = [s for s in self._states.values() if not s.evicted]
        return (sum(s.nbytes for s in live) > self.budget_bytes
                or len(live) > self.max_states)

    def _enforce_budget(self) -> None:
        while self._over():
            candidates = [s for s in self._states.values() if not s.evicted]
            free = [s for s in candidates if not s.checked_out]
            if free:
                self._drop(min(free, key=lambda s: s.last_used))
                continue
            # Only checked-out states are left over budget: they go when released.
            for state in candidates:
                state.evicted = True
            break

    def _drop(self, state: PooledState) -> None:
        """Out of memory, onto the disk spill if there is one."""
        if self._states.get(state.key) is state:
            del self._states[state.key]
        if self.spill is not None and state.data is not None:
            self.spill.save(SpilledState(state.key, state.tokens, state.data))
        state.data = None


AUTO_FRACTION = 0.25  # of the memory available at load, for the automatic pool budget
AUTO_CEILING_MIB = 2048


def pool_budget_bytes(setting_mib: int) -> int:
    """The pool's byte budget for the `kv_pool_mb` setting (-1: automatic, 0: off)."""
    if setting_mib >= 0:
        return setting_mib << 20
    available = psutil.virtual_memory().available
    return int(min(available * AUTO_FRACTION, AUTO_CEILING_MIB << 20))


def make_pool(config: Config, info: RunInfo, kv_dir: Path | None) -> KvPool:
    """The pool of a session just opened; its disk spill only holds states this very model,
    load-time settings and engine make."""
    return KvPool(pool_budget_bytes(config.kv_pool_mb), make_spill(config, info, kv_dir))


def make_spill(config: Config, info: RunInfo, kv_dir: Path | None) -> KvSpill | None:
    """The disk spill for `config` (None without a directory or with `kv_disk_mb` 0). Made at
    open, and again when `kv_disk_mb` is raised from 0 on an open session: the setting is
    per-request, so it takes effect without a reopen."""
    if kv_dir is None or config.kv_disk_mb <= 0:
        return None
    identity = state_identity([info.model.fast_hash, str(info.model.size_bytes),
                               signature(config), info.engine_version,
                               info.llama_cpp_python_version])
    return KvSpill(kv_dir, identity, config.kv_disk_mb << 20)
