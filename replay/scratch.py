"""The scratch store a replay records into: its runs in plain lists, in this process only.

A replay re-runs a recorded run and compares its facts; the facts it records are never kept.
So the store that takes them needs no file, no SQL, no hash chain and no writer thread: it keeps
each run's events in a list, with the same all-or-nothing appends (`ConcurrencyError` when the
log moved on) that the engine relies on when it resumes after a replayed crash.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventstore import (
    ConcurrencyError,
    NewEvent,
    RunRecord,
    RunSummary,
    StoredEvent,
    UnknownRun,
)
from eventstore.chain import ChainReport

__all__ = ["ScratchStore"]


class ScratchStore:
    """An event store in memory for one thread (a replay's): runs, their events and their
    status, nothing else (no hashes, no leases, no summaries)."""

    def __init__(self) -> None:
        self._logs: dict[str, _Log] = {}

    def create_run(
        self,
        run_id: str,
        task: str,
        *,
        parent_id: str | None = None,
        branch_seq: int | None = None,
        info: dict[str, Any] | None = None,
        created_at: float | None = None,
        events: Sequence[NewEvent] = (),
        status: str | None = None,
        summary: RunSummary | None = None,
        claim: bool = False,
    ) -> RunRecord:
        if run_id in self._logs:
            raise ConcurrencyError(f"Run {run_id!r} exists already in the scratch store.")
        at = created_at if created_at is not None else time.time()
        record = RunRecord(run_id, task, "created", at, at, 0, parent_id, branch_seq, info or {})
        self._logs[run_id] = _Log(record, [], status or "created", at)
        if events:
            self.append(run_id, 0, events, status=status)
        return self.run(run_id)

    def append(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[NewEvent],
        *,
        status: str | None = None,
        durable: bool = False,
        summary: RunSummary | None = None,
    ) -> int:
        log = self._log(run_id)
        if len(log.events) != expected_seq:
            raise ConcurrencyError(
                f"Run {run_id!r} is at seq {len(log.events)}, not {expected_seq}."
            )
        log.events.extend(events)  # made stored events when read (see `read`): rarely
        log.updated_at = time.time()
        if status:
            log.status = status
        return len(log.events)

    def claim(self, run_id: str, *, force: bool = False) -> None:
        self.run(run_id)

    def release(self, run_id: str) -> None:
        pass

    def claim_next(
        self, *, kinds: Sequence[str] = ("queued", "ready", "orphaned")
    ) -> RunRecord | None:
        return None

    def wait_for_append(self, timeout: float) -> bool:
        return True

    def read(self, run_id: str, *, after: int = 0, upto: int | None = None) -> list[StoredEvent]:
        return [
            StoredEvent(
                run_id, seq, e.kind, e.payload, json.loads(e.meta), e.recorded_at, e.version
            )
            for seq, e in enumerate(self._log(run_id).events[after:upto], start=after + 1)
        ]

    def written(self, run_id: str) -> list[NewEvent]:
        """The run's events as the engine made them, in order (nothing parsed)."""
        return list(self._log(run_id).events)

    def verify(self, run_id: str) -> ChainReport:
        return ChainReport(run_id, len(self._log(run_id).events), 0, None)

    @contextmanager
    def batch(self) -> Iterator[None]:
        yield

    def run(self, run_id: str) -> RunRecord:
        log = self._log(run_id)
        return dataclasses.replace(
            log.record, status=log.status, updated_at=log.updated_at, last_seq=len(log.events)
        )

    def _log(self, run_id: str) -> _Log:
        log = self._logs.get(run_id)
        if log is None:
            raise UnknownRun(run_id, list(self._logs))
        return log

    def runs(
        self,
        *,
        status: str | None = None,
        model: str | None = None,
        task: str | None = None,
        since: float | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        parents: Sequence[str] | None = None,
    ) -> list[RunRecord]:
        return [
            r
            for r in map(self.run, self._logs)
            if (status is None or r.status == status)
            and (parents is None or r.parent_id in parents)
        ]

    def resolve(self, run_id_or_prefix: str) -> str:
        return self.run(run_id_or_prefix).run_id

    def set_status(self, run_id: str, status: str) -> None:
        log = self._log(run_id)
        log.status, log.updated_at = status, time.time()

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"ScratchStore({len(self._logs)} runs)"


@dataclasses.dataclass(slots=True)
class _Log:
    """One run of the scratch store: its record as created, its events as appended (as the
    engine made them: parsed only when read), and where it stands now."""

    record: RunRecord
    events: list[NewEvent]
    status: str
    updated_at: float

    def __repr__(self) -> str:
        return f"_Log({self.record.run_id!r}, {len(self.events)} events, {self.status})"
