"""Live tail: follow one run, or every run, as another process records it.

The follower keeps, per run, the last seq it gave out and reads only what comes after it
(`store.read(run_id, after=seq)`), so it never misses or repeats a fact whatever the timing;
between reads it sleeps in `store.wait_for_append` (SQLite: `PRAGMA data_version` polling with
back-off; PostgreSQL: LISTEN/NOTIFY).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agentsm.trace import TraceEntry
from eventstore import EventStore

from .source import resolve_run

__all__ = ["ENDED", "LiveFact", "follow"]

ENDED = frozenset({"done", "failed", "aborted"})
"""The statuses of a run that will record nothing more by itself (a resume may still go on)."""


@dataclass(frozen=True)
class LiveFact:
    """One fact as the tail gives it: the run it belongs to and its trace entry."""

    run_id: str
    entry: TraceEntry

    def __repr__(self) -> str:
        return f"LiveFact(run_id={self.run_id!r}, seq={self.entry.seq}, kind={self.entry.event!r})"


def follow(
    store: EventStore,
    run_id: str | None = None,
    *,
    after_seq: int = 0,
    from_start: bool = True,
    until_end: bool = True,
    poll: float = 1.0,
) -> AsyncIterator[LiveFact]:
    """The facts of run `run_id` (an id or a unique prefix) with seq above `after_seq`, as they
    are recorded, ending once the run has ended (status done, failed or aborted) unless not
    `until_end`. Without `run_id`, the facts of every run, old and new, as they come (each
    run's in order, runs interleaved by time), without end; `from_start=False` skips what the
    runs hold when `follow` is called (`after_seq` and `until_end` are for one run). `poll` is
    the longest sleep between looks. An unknown run is refused here, before any iteration."""
    if run_id is not None:
        return _follow_one(store, resolve_run(store, run_id), after_seq, until_end, poll)
    cursors = {} if from_start else {r.run_id: r.last_seq for r in store.runs()}
    return _follow_all(store, cursors, poll)


async def _follow_all(
    store: EventStore, cursors: dict[str, int], poll: float
) -> AsyncIterator[LiveFact]:
    while True:
        fresh = await asyncio.to_thread(_read_all, store, cursors)
        for fact in fresh:
            cursors[fact.run_id] = fact.entry.seq
            yield fact
        if not fresh:
            await asyncio.to_thread(store.wait_for_append, poll)


async def _follow_one(
    store: EventStore, run_id: str, after_seq: int, until_end: bool, poll: float
) -> AsyncIterator[LiveFact]:
    seq = after_seq
    while True:
        record = await asyncio.to_thread(store.run, run_id)  # before the read: its status
        events = await asyncio.to_thread(store.read, run_id, after=seq)  # covers what it says
        for stored in events:
            seq = stored.seq
            yield LiveFact(run_id, TraceEntry.from_stored(stored))
        if until_end and record.status in ENDED and seq >= record.last_seq:
            return
        if not events:
            await asyncio.to_thread(store.wait_for_append, poll)


def _read_all(store: EventStore, cursors: dict[str, int]) -> list[LiveFact]:
    """What every run recorded past its cursor, each run's facts in order, runs merged by
    the time of their facts."""
    batches = []
    for record in store.runs():
        start = cursors.get(record.run_id, 0)
        if record.last_seq > start:
            run_id = record.run_id
            batches.append(
                [
                    LiveFact(run_id, TraceEntry.from_stored(e))
                    for e in store.read(run_id, after=start)
                ]
            )
    return list(heapq.merge(*batches, key=lambda fact: fact.entry.timestamp))
