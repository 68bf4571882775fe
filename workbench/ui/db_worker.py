"""The database on its own thread, awaited from the UI loop.

The store is synchronous and belongs to one thread (sqlite3 connections refuse others), so
every call, including opening it, runs on a single "db" worker. The UI awaits results and never
blocks on the disk. Calls run in submission order, which keeps a streaming message's throttled
updates ordered before its final write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from workbench.store import Store

T = TypeVar("T")


class AsyncStore:
    """`db = await AsyncStore.open(path)`; `await db.call(lambda s: s.add_message(...))`."""

    def __init__(self, executor: ThreadPoolExecutor) -> None:
        self._executor = executor
        self._store: Store | None = None
        self.path: Path | None = None

    @classmethod
    async def open(cls, path: Path) -> AsyncStore:
        self = cls(ThreadPoolExecutor(max_workers=1, thread_name_prefix="db"))
        self.path = path
        loop = asyncio.get_running_loop()
        try:
            self._store = await loop.run_in_executor(self._executor, Store.open, path)
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        return self

    async def call(self, fn: Callable[[Store], T]) -> T:
        store = self._store
        if store is None:
            raise RuntimeError("the conversation database is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, store)

    async def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, store.close)
        self._executor.shutdown(wait=False)
