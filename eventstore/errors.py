"""Errors raised by the event store.

StoreError                 any failure of the store, with the cause chained
├── ConcurrencyError       a second writer appended the same sequence number (or a superseded
│                          driver appended late)
├── RunInUse               a live process drives the run; it is not taken over
├── NotAnEventLog          the database holds no event log (and may not be given one)
├── SchemaVersionError     the database was written by a newer version
└── UnknownRun             no run with that id
"""

from __future__ import annotations

__all__ = [
    "ConcurrencyError",
    "NotAnEventLog",
    "RunInUse",
    "SchemaVersionError",
    "StoreError",
    "UnknownRun",
]


class StoreError(Exception):
    """A failure of the event store; the message says what went wrong and what to do."""


class ConcurrencyError(StoreError):
    """Another writer appended to the same run first: the log was left untouched."""


class NotAnEventLog(StoreError):
    """The database exists but is not an event log."""


class RunInUse(StoreError):
    """A live process drives the run (its `driver`): it is not resumed or written under it."""

    def __init__(self, run_id: str, driver: object, message: str) -> None:
        self.run_id = run_id
        self.driver = driver
        super().__init__(message)


class SchemaVersionError(StoreError):
    """The database schema is newer than this code understands."""


class UnknownRun(StoreError):
    """No run with the given id exists in the store."""

    def __init__(self, run_id: str, known: list[str]) -> None:
        self.run_id = run_id
        self.closest = known
        hint = f" Closest ids: {', '.join(known)}." if known else " The store has no such run."
        super().__init__(f"Unknown run id {run_id!r}.{hint}")


class AmbiguousRunId(UnknownRun):
    """A run id prefix that several runs share: nothing is chosen for the user."""

    def __init__(self, prefix: str, matches: list[str]) -> None:
        super().__init__(prefix, matches)
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        self.args = (
            f"Run id prefix {prefix!r} matches {len(matches)} runs ({shown}); give more of the id.",
        )
