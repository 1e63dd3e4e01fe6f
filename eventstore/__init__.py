"""eventstore: a generic append-only event log in SQLite or PostgreSQL; it knows nothing
about agents.

Every exported name is imported on first use, so a command that lists a log pays for SQLite
only (the migrations' sqlite-utils loads when a log needs migrating)."""

from typing import TYPE_CHECKING, Any

from .lazy import exports

if TYPE_CHECKING:
    from .chain import ChainBreak, ChainReport
    from .driver import Driver
    from .errors import (
        AmbiguousRunId,
        ConcurrencyError,
        LeaseLost,
        LogTampered,
        NotAnEventLog,
        RunInUse,
        SchemaVersionError,
        StoreError,
        UnknownRun,
    )
    from .migrations import LATEST as SCHEMA_VERSION
    from .open import open_store
    from .postgres import PostgresEventStore
    from .protocol import AsyncAppend, AsyncDrive, EventStore, Inbox, PayloadReader, Searchable
    from .records import InboxMessage, NewEvent, RunRecord, RunSummary, StoredEvent
    from .sqlite import DURABILITY, Durability, SQLiteEventStore

__all__ = [
    "DURABILITY",
    "SCHEMA_VERSION",
    "AmbiguousRunId",
    "AsyncAppend",
    "AsyncDrive",
    "ChainBreak",
    "ChainReport",
    "ConcurrencyError",
    "Driver",
    "Durability",
    "EventStore",
    "Inbox",
    "InboxMessage",
    "LeaseLost",
    "LogTampered",
    "NewEvent",
    "NotAnEventLog",
    "PayloadReader",
    "PostgresEventStore",
    "RunInUse",
    "RunRecord",
    "RunSummary",
    "SQLiteEventStore",
    "SchemaVersionError",
    "Searchable",
    "StoreError",
    "StoredEvent",
    "UnknownRun",
    "open_store",
]

_LAZY: dict[str, tuple[str, ...]] = {
    ".chain": ("ChainBreak", "ChainReport"),
    ".driver": ("Driver",),
    ".errors": (
        "AmbiguousRunId",
        "ConcurrencyError",
        "LeaseLost",
        "LogTampered",
        "NotAnEventLog",
        "RunInUse",
        "SchemaVersionError",
        "StoreError",
        "UnknownRun",
    ),
    ".migrations": ("SCHEMA_VERSION",),
    ".open": ("open_store",),
    ".protocol": (
        "AsyncAppend",
        "AsyncDrive",
        "EventStore",
        "Inbox",
        "PayloadReader",
        "Searchable",
    ),
    ".records": ("InboxMessage", "NewEvent", "RunRecord", "RunSummary", "StoredEvent"),
    ".sqlite": ("DURABILITY", "Durability", "SQLiteEventStore"),
}
"""Where each exported name lives, by module."""

_RENAMED = {"SCHEMA_VERSION": "LATEST"}
"""Names exported under another name than their module's."""

_exported, __dir__ = exports(__name__, globals(), _LAZY, _RENAMED)


def __getattr__(name: str) -> Any:
    """An exported name, or a submodule, imported on first use and kept. `PostgresEventStore`
    needs psycopg, the optional `postgres` extra."""
    if name == "PostgresEventStore":
        from .open import postgres_store_class

        return postgres_store_class()
    return _exported(name)
