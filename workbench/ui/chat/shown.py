"""What one message widget shows: a message plus its place among its versions (Qt-free)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.store import MessageStats


@dataclass(slots=True)
class ShownMessage:
    id: int
    role: str  # "user", "assistant" or "system"
    content: str
    reasoning: str = ""
    status: str = "complete"  # the store's statuses
    error: str = ""
    stats: MessageStats = field(default_factory=MessageStats)
    version: int = 1  # 1-based position among its siblings
    versions: int = 1
    previous_id: int | None = None  # the sibling the "<" arrow shows
    next_id: int | None = None
    images: list[Any] = field(default_factory=list)  # StoredImage: what the message carried

    @classmethod
    def from_store(cls, message: Any, siblings: Any | None = None,
                   images: list[Any] | None = None) -> ShownMessage:
        shown = cls(
            id=message.id, role=message.role, content=message.content,
            reasoning=message.reasoning, status=message.status, error=message.error,
            stats=message.stats,  # frozen: shared, not copied
            images=list(images or []),
        )
        if siblings is not None:
            shown.version, shown.versions = siblings.index + 1, siblings.count
            shown.previous_id = siblings.previous.id if siblings.previous else None
            shown.next_id = siblings.next.id if siblings.next else None
        return shown
