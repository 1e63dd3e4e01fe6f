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

from agentsm.trace import FullCalls, TraceEntry, decode, decoded, read_events
from eventstore import EventStore, StoredEvent

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
    folds: dict[str, FullCalls] = {}
    while True:
        fresh = await asyncio.to_thread(_read_all, store, cursors, folds)
        for fact in fresh:
            cursors[fact.run_id] = fact.entry.seq
            yield fact
        if not fresh:
            await asyncio.to_thread(store.wait_for_append, poll)


def _calls(store: EventStore, run_id: str, upto: int) -> FullCalls:
    """A run's facts folded up to seq `upto`, to give the next ones' tool calls in full."""
    full = FullCalls()
    if upto > 0:
        for _, fact in decoded(read_events(store, run_id, upto=upto)):
            full(fact)
    return full


def _entry(stored: StoredEvent, full: FullCalls) -> TraceEntry:
    return TraceEntry.of(stored, full(decode(stored)))


async def _follow_one(
    store: EventStore, run_id: str, after_seq: int, until_end: bool, poll: float
) -> AsyncIterator[LiveFact]:
    seq = after_seq
    full = await asyncio.to_thread(_calls, store, run_id, seq)
    while True:
        record = await asyncio.to_thread(store.run, run_id)  # before the read: its status
        events = await asyncio.to_thread(store.read, run_id, after=seq)  # covers what it says
        for stored in events:
            seq = stored.seq
            yield LiveFact(run_id, _entry(stored, full))
        if until_end and record.status in ENDED and seq >= record.last_seq:
            return
        if not events:
            await asyncio.to_thread(store.wait_for_append, poll)


def _read_all(
    store: EventStore, cursors: dict[str, int], folds: dict[str, FullCalls]
) -> list[LiveFact]:
    """What every run recorded past its cursor, each run's facts in order, runs merged by
    the time of their facts (`folds`: each run's facts folded so far)."""
    batches = []
    for record in store.runs():
        start = cursors.get(record.run_id, 0)
        if record.last_seq > start:
            run_id = record.run_id
            full = folds.get(run_id)
            if full is None:
                full = folds[run_id] = _calls(store, run_id, start)
            batches.append(
                [LiveFact(run_id, _entry(e, full)) for e in store.read(run_id, after=start)]
            )
            if record.status in ENDED:  # folded again if it is resumed
                del folds[run_id]
    return list(heapq.merge(*batches, key=lambda fact: fact.entry.timestamp))
