"""Storage for the workbench window: conversations as message trees, runs, presets (SQLite).

Qt-free; see store.py for the threading rule.
"""

from workbench.store.faults import (
    SchemaTooNew,
    StoreBusy,
    StoreDamaged,
    StoreFault,
    StoreFull,
    StoreUnwritable,
)
from workbench.store.images import StoredImage, new_image
from workbench.store.message_stats import MessageStats, continued_stats
from workbench.store.records import (
    ROLES,
    STATUSES,
    Conversation,
    Imported,
    Message,
    NotFound,
    Run,
    SearchHit,
    Siblings,
)
from workbench.store.schema import SCHEMA_VERSION
from workbench.store.stats_line import format_stats_line
from workbench.store.store import Store, default_path

__all__ = [
    "ROLES",
    "SCHEMA_VERSION",
    "STATUSES",
    "Conversation",
    "Imported",
    "Message",
    "MessageStats",
    "NotFound",
    "Run",
    "SchemaTooNew",
    "SearchHit",
    "Siblings",
    "Store",
    "StoreBusy",
    "StoreDamaged",
    "StoreFault",
    "StoreFull",
    "StoreUnwritable",
    "StoredImage",
    "continued_stats",
    "default_path",
    "format_stats_line",
    "new_image",
]
