"""The database on its own thread, awaited from the UI loop.

The store is synchronous and belongs to one thread (sqlite3 connections refuse others), so
every call, including opening it, runs on a single "db" worker. The UI awaits results and never
blocks on the disk. Calls run in submission order, which keeps a streaming message's throttled
updates ordered before its final write.

A file that cannot be used does not stop the window: `open` falls back to a temporary store in
memory and keeps the reason in `fault` (workbench/store/faults.py), a copy of the file's
conversations when the file is readable but its place is not writable or full. `start_fresh`
(a damaged file: moved aside, kept, and optionally salvaged) and `retry` (the place is usable
again) move to a real store, adding what was written in the temporary one meanwhile. A call that
fails because of the file or its place (a disk that fills up) is reported to `on_fault`.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from workbench.store import Store, StoreFault, StoreFull, StoreUnwritable
from workbench.store.faults import classify
from workbench.store.salvage import Copied, SalvageReport, copy_rows, move_aside, salvage
from workbench.store.writers import live_writers

T = TypeVar("T")


class StoreInUse(RuntimeError):
    """Another live workbench (a second window) has the file open: it must not be moved."""


@dataclass
class Rebuilt:
    aside: Path  # where the damaged file was moved (kept)
    salvaged: SalvageReport | None  # None: started empty
    merged: Copied | None  # what the temporary store held, now in the new one


class AsyncStore:
    """`db = await AsyncStore.open(path)`; `await db.call(lambda s: s.add_message(...))`."""

    def __init__(self, executor: ThreadPoolExecutor) -> None:
        self._executor = executor
        self._store: Store | None = None
        self.path: Path | None = None
        self.fault: StoreFault | None = None  # why the store in use is a temporary one
        self.on_fault: Callable[[StoreFault], None] | None = None  # a call hit one

    @classmethod
    async def open(cls, path: Path, *, fallback: bool = True) -> AsyncStore:
        """Open the file; with `fallback`, a StoreFault gives a temporary store and `fault`."""
        self = cls(ThreadPoolExecutor(max_workers=1, thread_name_prefix="db"))
        self.path = path
        loop = asyncio.get_running_loop()
        try:
            self._store, self.fault = await loop.run_in_executor(
                self._executor, _open_or_temporary, path, fallback)
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        return self

    @property
    def temporary(self) -> bool:
        return self._store is not None and self._store.temporary

    @property
    def copied_conversations(self) -> int:
        """How many conversations a temporary store started with (copied from the file)."""
        store = self._store
        return 0 if store is None else store.seeded.get("conversations", 0)

    async def call(self, fn: Callable[[Store], T]) -> T:
        if self._store is None:
            raise RuntimeError("the conversation database is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._run, fn)
        except (sqlite3.Error, OSError) as exc:
            fault = classify(exc, self.path or "")
            if fault is not None and self.on_fault is not None:
                self.on_fault(fault)
            raise

    def _run(self, fn: Callable[[Store], T]) -> T:
        # The store is taken here, on the worker, in call order: a call made while start_fresh
        # or retry was queued runs on the store they left in place, not on the one they closed.
        store = self._store
        if store is None:
            raise RuntimeError("the conversation database is closed")
        return fn(store)

    async def start_fresh(self, salvaging: bool) -> Rebuilt:
        """The damaged file moved aside (kept), a new one in its place, what is readable of
        the old one copied in when `salvaging`, then what the temporary store holds.

        Raises StoreInUse while another workbench has the file open, a StoreFault when the new
        file cannot be made (the window stays on a temporary store)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._start_fresh, salvaging)

    def _start_fresh(self, salvaging: bool) -> Rebuilt:
        assert self.path is not None and self._store is not None
        old = self._store
        others = live_writers(self.path) - ({old.writer.token} if old.writer else set())
        if others:
            raise StoreInUse(f"{len(others)} other workbench window(s) have {self.path} open")
        if not old.temporary:  # a file that went bad while in use: let go of it first
            old.close()
            self._store = old = Store.open_temporary()
        aside = move_aside(self.path)
        try:
            fresh = Store.open(self.path)
        except StoreFault as fault:
            self.fault = fault
            raise
        report = salvage(aside, fresh._db) if salvaging else None
        merged = copy_rows(old._db, fresh._db, keep=old.seeded)
        old.close()
        self._store, self.fault = fresh, None
        return Rebuilt(aside, report, merged)

    async def retry(self) -> Copied:
        """Open the file again (its place was read-only or full); on success the temporary
        store's new conversations are added to it and it is in use. Raises the StoreFault
        that still stands."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._retry)

    def _retry(self) -> Copied:
        assert self.path is not None and self._store is not None
        old = self._store
        try:
            fresh = Store.open(self.path)
        except StoreFault as fault:
            self.fault = fault
            raise
        try:
            merged = copy_rows(old._db, fresh._db, keep=old.seeded)
        except BaseException:
            fresh.close()
            raise
        old.close()
        self._store, self.fault = fresh, None
        return merged

    async def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, store.close)
        self._executor.shutdown(wait=False)


def _open_or_temporary(path: Path, fallback: bool) -> tuple[Store, StoreFault | None]:
    try:
        return Store.open(path), None
    except StoreFault as fault:
        if not fallback:
            raise
        # A readable file in a place that cannot be written: start from a copy, so its
        # conversations can still be read (and exported). A damaged or newer one: empty.
        copy = path if isinstance(fault, StoreUnwritable | StoreFull) else None
        return Store.open_temporary(copy_of=copy), fault
