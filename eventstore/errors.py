"""Errors raised by the event store.

StoreError                 any failure of the store, with the cause chained
├── ConcurrencyError       a second writer appended the same sequence number (or a superseded
│   │                      driver appended late)
│   └── LeaseLost          this store's driver lost the run to another: it writes nothing more
├── RunInUse               a live process drives the run; it is not taken over
├── NotAnEventLog          the database holds no event log (and may not be given one)
├── SchemaVersionError     the database was written by a newer version
├── LogTampered            a run's log does not match its hash chain: changed after it was written
└── UnknownRun             no run with that id
"""

from __future__ import annotations

__all__ = [
    "ConcurrencyError",
    "LeaseLost",
    "LogTampered",
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


class LeaseLost(ConcurrencyError):
    """This store drove the run, and another driver has taken it (its lease ran out, or it was
    taken over with force): the store refuses every later write to the run from this driver,
    closing facts included, until the run is claimed again."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(message)


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
        hint = (
            f" Closest ids: {', '.join(known)}."
            if known
            else " The store has no such run (`agentsm runs` lists the ids it has)."
        )
        super().__init__(f"Unknown run id {run_id!r}.{hint}")


class AmbiguousRunId(UnknownRun):
    """A run id prefix that several runs share: nothing is chosen for the user."""

    def __init__(self, prefix: str, matches: list[str]) -> None:
        super().__init__(prefix, matches)
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        self.args = (
            f"Run id prefix {prefix!r} matches {len(matches)} runs ({shown}); give more of the id.",
        )


class LogTampered(StoreError):
    """A run's log does not match its hash chain (`eventstore.chain`): a fact was edited,
    deleted, reordered or lost its hash after it was recorded. Readers raise it before showing
    or using anything of the run; `problem` says where, in a few words."""

    def __init__(self, run_id: str, seq: int, kind: str, problem: str) -> None:
        self.run_id, self.seq, self.kind, self.problem = run_id, seq, kind, problem
        super().__init__(
            f"Run {run_id}'s log was changed after it was recorded: {problem}. See where its "
            f"chain breaks with `agentsm verify {run_id}`, and restore the run from a backup or "
            "an export made before the change."
        )

    def __repr__(self) -> str:
        return f"LogTampered(run_id={self.run_id!r}, seq={self.seq}, kind={self.kind!r})"
