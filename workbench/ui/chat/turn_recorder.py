"""One answer as it streams: its text so far, its token rows, its thinking, and when to save
(Qt-free).

The database gets the text and the new per-token rows at most once a second while the answer
streams (`due_write`, `unsaved_rows`) and the rest at the end; a crash loses at most that
second, of the text and of the telemetry alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from workbench.engine.metrics import TokenMetrics
from workbench.engine.requests import TokenEvent

WRITE_EVERY_S = 1.0


class TurnRecorder:
    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._last_write = now()
        self.rows: list[TokenMetrics] = []
        self._saved = 0  # rows handed out by unsaved_rows()
        self.answer = ""
        self.reasoning = ""
        self._first_answer_row = -1  # index of the first token after which answer text showed

    def on_token(self, event: TokenEvent) -> None:
        m = event.metrics
        self.rows.append(m)
        # The metrics carry the parsed text so far, so a reset (reclassified text) needs no
        # special case: the snapshot is always right.
        self.answer, self.reasoning = m.text, m.reasoning
        if self._first_answer_row < 0 and self.answer:
            self._first_answer_row = len(self.rows) - 1

    def unsaved_rows(self) -> list[TokenMetrics]:
        """The rows not handed out before (each row is handed out once), for the next save."""
        rows = self.rows[self._saved:]
        self._saved = len(self.rows)
        return rows

    @property
    def pieces(self) -> list[str]:
        return [r.piece for r in self.rows]

    @property
    def thinking_tokens(self) -> int:
        """Tokens generated before the answer began (only meaningful when there is reasoning)."""
        if not self.reasoning:
            return 0
        return self._first_answer_row if self._first_answer_row >= 0 else len(self.rows)

    def thinking_seconds(self) -> float:
        """Engine time of the thinking tokens: decode wall plus loop overhead (s)."""
        n = self.thinking_tokens
        return sum(r.wall_ms + max(0.0, r.loop_overhead_ms) for r in self.rows[:n]) / 1e3

    def due_write(self) -> bool:
        """True at most once per WRITE_EVERY_S; the caller then saves the text so far."""
        now = self._now()
        if now - self._last_write >= WRITE_EVERY_S:
            self._last_write = now
            return True
        return False
