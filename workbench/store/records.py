"""The plain records the store hands out, and the words it accepts for roles and statuses.

Records are snapshots: changing one changes nothing in the database; call a Store method.
Times are Unix seconds (float), as time.time() gives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from workbench.engine.metrics import RunSummary
from workbench.store.message_stats import MessageStats

ROLES = ("system", "user", "assistant", "tool")  # tool: a tool call's result
STATUSES = ("complete", "streaming", "stopped", "interrupted", "error", "rejected")

JsonDict = dict[str, Any]


class NotFound(KeyError):
    """No conversation, message, run or preset with that key (a KeyError, so `except KeyError`
    works too)."""


@dataclass(slots=True)
class Conversation:
    id: int
    title: str
    created_at: float
    updated_at: float  # last message added, or renamed; lists sort on it, newest first
    active_leaf_id: int | None  # the last message of the branch on screen; None when empty
    deleted_at: float | None = None  # set by a soft delete, cleared by undo_delete


@dataclass(slots=True)
class Imported:
    """A conversation added from an export file, and what of the file was refused."""

    conversation: Conversation
    left_out: list[str] = field(default_factory=list)  # one line each: what, and why


@dataclass(slots=True)
class Message:
    id: int
    conversation_id: int
    parent_id: int | None  # None for a root (the first user or system message)
    role: str  # one of ROLES
    content: str
    reasoning: str
    status: str  # one of STATUSES
    error: str  # why status is "error" or "rejected"; empty otherwise
    stats: MessageStats  # the figures of the per-message stats line
    created_at: float
    # An answer's tool calls (OpenAI's `tool_calls`, JSON text; "" none); a 'tool' message's
    # call id and tool name (the call it answers).
    tool_calls: str = ""
    tool_call_id: str = ""
    tool_name: str = ""


@dataclass(slots=True)
class Siblings:
    """A message and its siblings (same parent), oldest first: the "2 of 3" arrows."""

    messages: list[Message]
    index: int  # 0-based position of the message asked about

    @property
    def count(self) -> int:
        return len(self.messages)

    @property
    def label(self) -> str:
        return f"{self.index + 1} of {self.count}"

    @property
    def previous(self) -> Message | None:
        return self.messages[self.index - 1] if self.index > 0 else None

    @property
    def next(self) -> Message | None:
        return self.messages[self.index + 1] if self.index + 1 < self.count else None


@dataclass(slots=True)
class Run:
    """One generation: what produced it and how it went (per-token rows: Store.token_rows)."""

    id: int
    message_id: int | None  # None for a headless run
    created_at: float
    label: str
    settings: JsonDict  # every resolved setting
    model: JsonDict  # ModelIdentity by field name (path, name, size_bytes, fast_hash)
    engine_version: str
    info: JsonDict  # RunInfo by field name
    summary: JsonDict  # RunSummary by field name; {} until the run finishes
    quality: JsonDict = field(default_factory=dict)  # a scored run's figures; {} when not scored
    n_token_rows: int = 0
    message_status: str | None = None  # its answer's status; None for a headless run

    @property
    def interrupted(self) -> bool:
        """The process died while this run streamed: it has rows up to the crash, no summary."""
        return not self.summary and self.message_status == "interrupted"

    @property
    def scored(self) -> bool:
        """A scored run (`workbench score`, Price it): its quality figures are kept."""
        return bool(self.quality.get("figures"))

    def run_summary(self) -> RunSummary | None:
        """The summary as a RunSummary (for its derived rates), or None if not finished.

        Keys this version does not know are ignored; a missing required one gives None.
        """
        known = {f.name for f in fields(RunSummary)}
        try:
            return RunSummary(**{k: v for k, v in self.summary.items() if k in known})
        except TypeError:
            return None


@dataclass(slots=True)
class SearchHit:
    conversation: Conversation
    message_id: int | None  # None when the title matched
    snippet: str  # plain text around the first match, "…" where it was cut
    spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of matches in it
