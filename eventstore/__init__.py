"""eventstore: a generic append-only event log in SQLite; it knows nothing about agents."""

from .chain import ChainBreak, ChainReport
from .driver import Driver
from .errors import (
    AmbiguousRunId,
    ConcurrencyError,
    NotAnEventLog,
    RunInUse,
    SchemaVersionError,
    StoreError,
    UnknownRun,
)
from .migrations import LATEST as SCHEMA_VERSION
from .protocol import AsyncAppend, EventStore
from .records import NewEvent, RunRecord, RunSummary, StoredEvent
from .sqlite import DURABILITY, Durability, SQLiteEventStore

__all__ = [
    "DURABILITY",
    "SCHEMA_VERSION",
    "AmbiguousRunId",
    "AsyncAppend",
    "ChainBreak",
    "ChainReport",
    "ConcurrencyError",
    "Driver",
    "Durability",
    "EventStore",
    "NewEvent",
    "NotAnEventLog",
    "RunInUse",
    "RunRecord",
    "RunSummary",
    "SQLiteEventStore",
    "SchemaVersionError",
    "StoreError",
    "StoredEvent",
    "UnknownRun",
]
