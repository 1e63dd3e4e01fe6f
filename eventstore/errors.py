"""Errors raised by the event store.

StoreError                 any failure of the store, with the cause chained
├── ConcurrencyError       a second writer appended the same sequence number
├── NotAnEventLog          the database holds no event log (and may not be given one)
├── SchemaVersionError     the database was written by a newer version
└── UnknownRun             no run with that id
"""

from __future__ import annotations

__all__ = ["ConcurrencyError", "NotAnEventLog", "SchemaVersionError", "StoreError", "UnknownRun"]


class StoreError(Exception):
    """A failure of the event store; the message says what went wrong and what to do."""


class ConcurrencyError(StoreError):
    """Another writer appended to the same run first: the log was left untouched."""


class NotAnEventLog(StoreError):
    """The database exists but is not an event log."""


class SchemaVersionError(StoreError):
    """The database schema is newer than this code understands."""


class UnknownRun(StoreError):
    """No run with the given id exists in the store."""

    def __init__(self, run_id: str, known: list[str]) -> None:
        self.run_id = run_id
        self.closest = known
        hint = f" Closest ids: {', '.join(known)}." if known else " The store has no such run."
        super().__init__(f"Unknown run id {run_id!r}.{hint}")
