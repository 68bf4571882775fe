"""An answer's stall explanation from the store (Qt-free; runs on the database worker): every
run of the answer (a continued one has several) in the order they ran, one token list, as the
plots show it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.bench.stall_report import expert_bytes_of
from workbench.bench.stalls import Explanation, explain_answer, prefill_of
from workbench.moe.layout import ModelFileError
from workbench.store import Store


@dataclass(frozen=True, slots=True)
class AnswerStalls:
    message_id: int
    n_rows: int
    explanation: Explanation


def answer_stalls(store: Store, message_id: int) -> AnswerStalls | None:
    """None when the answer has no stored token rows."""
    runs = sorted(store.list_runs(message_id=message_id), key=lambda r: (r.created_at, r.id))
    rows: list[dict[str, Any]] = []
    for run in runs:
        rows += store.token_rows(run.id)
    if not runs or not rows:
        return None
    first, last = runs[0], runs[-1]
    threads = last.settings.get("n_threads")
    if not isinstance(threads, int) or isinstance(threads, bool):
        threads = -1
    size = -1.0
    model = str(last.settings.get("model") or last.model.get("path") or "")
    if model and last.info.get("n_expert", 0):
        try:
            size = expert_bytes_of(model)
        except (ModelFileError, OSError):  # moved or changed since: no expert count
            size = -1.0
    # Only the first run of an answer prefilled the question (a continuation reads its own
    # answer back), and its first row is the answer's first token.
    prefill = prefill_of(first.summary)
    explanation = explain_answer(rows, prefill=prefill, expert_bytes=size, threads=threads)
    return AnswerStalls(message_id, len(rows), explanation)
