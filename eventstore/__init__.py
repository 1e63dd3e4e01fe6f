"""eventstore: a generic append-only event log in SQLite or PostgreSQL; it knows nothing
about agents."""

from typing import TYPE_CHECKING, Any

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
from .protocol import AsyncAppend, AsyncDrive, EventStore, Inbox, PayloadReader, Searchable
from .records import InboxMessage, NewEvent, RunRecord, RunSummary, StoredEvent
from .sqlite import DURABILITY, Durability, SQLiteEventStore

if TYPE_CHECKING:
    from .postgres import PostgresEventStore

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


def __getattr__(name: str) -> Any:
    """`PostgresEventStore` on first use: psycopg is the optional `postgres` extra."""
    if name == "PostgresEventStore":
        from .open import postgres_store_class

        return postgres_store_class()
    raise AttributeError(f"module 'eventstore' has no attribute {name!r}")
