"""Which kept conversation state a request continues: the one sharing the longest prefix.

OpenAI clients carry no conversation id: each request resends the conversation. The session
keeps KV states per conversation key (engine/kv_pool.py); the server gives its requests keys of
its own (`server:…`, apart from the window's conversations) and sends a request to the key
whose held tokens share the longest prefix with its prompt, as llama.cpp's server picks a slot.
A request that shares too little (less than `SIMILARITY` of what a key holds) starts a new key
rather than overwrite a conversation another client is still growing.
"""

from __future__ import annotations

import itertools
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

PREFIX = "server:"
SIMILARITY = 0.5  # shared / held tokens a request needs to take over a key's state
MAX_SLOTS = 8  # keys remembered (the least recently used is forgotten: its state ages out)


@dataclass(frozen=True, slots=True)
class Match:
    key: str
    n_shared: int  # tokens of the prompt the key's state holds already
    n_held: int  # tokens the key's state holds


class Slots:
    """The server's conversation keys, most recently used last. Engine thread only."""

    def __init__(self, max_slots: int = MAX_SLOTS) -> None:
        self.max_slots = max_slots
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._ids = itertools.count(1)
        self._space = uuid.uuid4().hex[:6]  # two servers on one session never share a key
        self._forgotten: list[str] = []

    @property
    def keys(self) -> list[str]:
        return list(self._keys)

    def choose(self, measure: Callable[[str], Match | None]) -> Match | None:
        """The key to use (its match), or None for a fresh one (see `new`). `measure(key)`
        says what a key shares with the request's prompt (None: it holds nothing now)."""
        best: Match | None = None
        for key in list(self._keys):
            match = measure(key)
            if match is None:
                continue
            if match.n_shared > 0 and match.n_shared >= SIMILARITY * match.n_held and (
                    best is None or match.n_shared > best.n_shared):
                best = match
        if best is not None:
            self._keys.move_to_end(best.key)
        return best

    def new(self) -> str:
        key = f"{PREFIX}{self._space}:{next(self._ids)}"
        self._keys[key] = None
        while len(self._keys) > self.max_slots:
            self._forgotten.append(self._keys.popitem(last=False)[0])
        return key

    def take_forgotten(self) -> list[str]:
        """Keys `new` let go of since the last call: their kept states should go too."""
        out, self._forgotten = self._forgotten, []
        return out
