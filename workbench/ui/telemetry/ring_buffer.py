"""A fixed-size ring of float64 rows whose newest rows are always one contiguous view (Qt-free).

Each row is written twice, at i and i + capacity (the friture trick), so the last n rows are
`data[start:start + n]` with no copy and no wrap-around; plots get views, never fresh arrays.
Memory is allocated once, up front: appending a token never allocates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RingBuffer:
    def __init__(self, capacity: int, columns: Sequence[str]) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.columns = tuple(columns)
        self.index = {name: i for i, name in enumerate(self.columns)}
        self._data = np.full((2 * capacity, len(self.columns)), np.nan, dtype=np.float64)
        self._written = 0  # rows appended since the last clear (may exceed capacity)

    def __len__(self) -> int:
        return min(self._written, self.capacity)

    @property
    def written(self) -> int:
        return self._written

    def append(self, row: Sequence[float] | np.ndarray) -> None:
        i = self._written % self.capacity
        self._data[i] = row
        self._data[i + self.capacity] = row
        self._written += 1

    def extend(self, rows: np.ndarray) -> None:
        for row in rows:
            self.append(row)

    def view(self) -> np.ndarray:
        """The retained rows, oldest first, as a read-only view (valid until the next append)."""
        n = len(self)
        start = (self._written - n) % self.capacity
        out = self._data[start:start + n]
        out.flags.writeable = False
        return out

    def column(self, name: str) -> np.ndarray:
        return self.view()[:, self.index[name]]

    def last(self) -> np.ndarray | None:
        return self.view()[-1] if self._written else None

    def clear(self) -> None:
        self._data.fill(np.nan)
        self._written = 0
