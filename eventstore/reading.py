"""A run's events read with its hash chain checked on the way (`read_checked`).

Every reader of a run (a trace, a fold, a replay, the viewer) goes through here, so that a log
changed after it was written (a fact edited, deleted or moved) is refused with `LogTampered`
before anything of it is shown or used, not shown as if it had been recorded so. Checking
costs a SHA-256 per event, against a decoding per event that a reader does anyway.

A store that reads bare rows with their hashes (`ChainedReader`) is read that way; any other
is read through `EventStore.read`. A run whose first events have no hash (recorded before
hashes were kept) is checked against the store's own idea of where hashes begin
(`EventStore.verify`), so that hashes stripped from a whole run do not pass for an old log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import Any, Protocol, TypeVar, runtime_checkable

from .chain import GENESIS, ChainCheck
from .protocol import EventStore
from .records import StoredEvent

__all__ = ["CHUNK", "ChainedReader", "Row", "checked_chunks", "events_checked", "read_checked"]

T = TypeVar("T")

CHUNK = 4096
"""Events read at a time: a long run is never held twice (as rows and as facts) at once."""

Row = tuple[int, str, int, str, "str | dict[str, Any]", float, "str | None"]
"""One event as (seq, kind, version, payload, meta as text or parsed, recorded_at, hash)."""


@runtime_checkable
class ChainedReader(Protocol):
    """A store that reads a run's events as bare rows with their hashes, (seq, kind, version,
    payload, meta text, recorded_at, hash), nothing parsed: the cheapest checked read."""

    def read_chained(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> list[tuple[int, str, int, str, str, float, str | None]]: ...


def _rows(store: EventStore, run_id: str, after: int, upto: int) -> list[Row]:
    if isinstance(store, ChainedReader):
        return list(store.read_chained(run_id, after=after, upto=upto))
    return [
        (e.seq, e.kind, e.version, e.payload, e.meta, e.recorded_at, e.hash)
        for e in store.read(run_id, after=after, upto=upto)
    ]


def _events(store: EventStore, run_id: str, after: int, upto: int) -> list[StoredEvent]:
    return store.read(run_id, after=after, upto=upto)


def _fields(e: StoredEvent) -> Row:
    return (e.seq, e.kind, e.version, e.payload, e.meta, e.recorded_at, e.hash)


def _checked(
    store: EventStore,
    run_id: str,
    after: int,
    previous: str,
    upto: int | None,
    read: Callable[[EventStore, str, int, int], Sequence[T]],
    fields: Callable[[T], Row] | None,
    made: Callable[[T, str | None], Any] | None = None,
) -> Iterator[Sequence[Any]]:
    """The items `read` gives, a read at a time, each checked (`fields` gives an item's row,
    None when the items are rows); with `made`, each made of the item and its hash as the
    chain has it (the store's, or the one computed where the store keeps none)."""
    last = store.run(run_id).last_seq
    end = last if upto is None else min(upto, last)
    check = ChainCheck(run_id, seq=after, previous=previous)
    while after < end:
        found: Sequence[Any] = read(store, run_id, after, min(end, after + CHUNK))
        if not found:
            break
        rows = found if fields is None else [fields(item) for item in found]
        if made is None:
            check.rows(rows)
        else:
            hashes: list[str | None] = []
            check.rows(rows, hashes)
            found = [made(item, hash_) for item, hash_ in zip(found, hashes, strict=True)]
        if check.seq > end:  # a store that reads whole rows: those past `end` were only checked
            found = found[: len(found) - (check.seq - end)]
        yield found
        after = check.seq
    check.end(end, last)
    if check.unhashed:  # a log from before hashes, or one whose hashes were all removed
        broken = store.verify(run_id).broken
        if broken is not None:
            raise broken.error(run_id)


def checked_chunks(
    store: EventStore,
    run_id: str,
    *,
    after: int = 0,
    previous: str = GENESIS,
    upto: int | None = None,
) -> Iterator[Sequence[Row]]:
    """`read_checked`, a read at a time: each list of rows is given once all of them are
    checked (for a reader that loops over them itself, a step less per event)."""
    return _checked(store, run_id, after, previous, upto, _rows, None)


def read_checked(
    store: EventStore,
    run_id: str,
    *,
    after: int = 0,
    previous: str = GENESIS,
    upto: int | None = None,
) -> Iterator[Row]:
    """The run's events with `after < seq <= upto` (default: to the catalog's last) as rows,
    in order, each checked against the hash chain before it is given; `LogTampered` at the
    first one that does not match, at a missing seq, or where the log stops short of the
    catalog. Reading from `after` > 0 takes `previous`, the hash of event `after`, as checked
    already (a checkpoint of a reader that read that far)."""
    return chain.from_iterable(
        checked_chunks(store, run_id, after=after, previous=previous, upto=upto)
    )


def events_checked(
    store: EventStore,
    run_id: str,
    *,
    after: int = 0,
    previous: str = GENESIS,
    upto: int | None = None,
) -> Iterator[StoredEvent]:
    """`read_checked`, giving stored events (as `EventStore.read` gives them). A store that
    reads bare rows is read so, each event's hash the one the chain checked: a store that keeps
    a hash for a group of events only (log format 2) is read on to that hash and checked there,
    also where the events asked for end before it."""
    if isinstance(store, ChainedReader):

        def made(row: Row, hash_: str | None) -> StoredEvent:
            seq, kind, version, payload, meta, at, _ = row
            parsed = json.loads(meta) if isinstance(meta, str) else meta
            return StoredEvent(run_id, seq, kind, payload, parsed, at, version, hash_)

        return chain.from_iterable(
            _checked(store, run_id, after, previous, upto, _rows, None, made)
        )
    return chain.from_iterable(_checked(store, run_id, after, previous, upto, _events, _fields))
