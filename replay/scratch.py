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
        self._runs: dict[str, RunRecord] = {}
        self._events: dict[str, list[StoredEvent]] = {}

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
    ) -> RunRecord:
        if run_id in self._runs:
            raise ConcurrencyError(f"Run {run_id!r} exists already in the scratch store.")
        at = created_at if created_at is not None else time.time()
        self._events[run_id] = []
        self._runs[run_id] = RunRecord(
            run_id, task, status or "created", at, at, 0, parent_id, branch_seq, info or {}
        )
        if events:
            self.append(run_id, 0, events, status=status)
        return self._runs[run_id]

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
        record = self.run(run_id)
        if record.last_seq != expected_seq:
            raise ConcurrencyError(
                f"Run {run_id!r} is at seq {record.last_seq}, not {expected_seq}."
            )
        log = self._events[run_id]
        for seq, e in enumerate(events, start=expected_seq + 1):
            log.append(
                StoredEvent(
                    run_id, seq, e.kind, e.payload, json.loads(e.meta), e.recorded_at, e.version
                )
            )
        last = expected_seq + len(events)
        self._runs[run_id] = _changed(record, last_seq=last, status=status or record.status)
        return last

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
        log = self._events.get(run_id)
        if log is None:
            raise UnknownRun(run_id, list(self._runs))
        return log[after:upto]

    def verify(self, run_id: str) -> ChainReport:
        return ChainReport(run_id, len(self.read(run_id)), 0, None)

    @contextmanager
    def batch(self) -> Iterator[None]:
        yield

    def run(self, run_id: str) -> RunRecord:
        record = self._runs.get(run_id)
        if record is None:
            raise UnknownRun(run_id, list(self._runs))
        return record

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
            for r in self._runs.values()
            if (status is None or r.status == status)
            and (parents is None or r.parent_id in parents)
        ]

    def resolve(self, run_id_or_prefix: str) -> str:
        return self.run(run_id_or_prefix).run_id

    def set_status(self, run_id: str, status: str) -> None:
        self._runs[run_id] = _changed(self.run(run_id), status=status)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"ScratchStore({len(self._runs)} runs)"


def _changed(record: RunRecord, **changes: Any) -> RunRecord:
    return dataclasses.replace(record, updated_at=time.time(), **changes)
