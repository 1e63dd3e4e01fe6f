"""Reading a run's facts from its log: the stored events checked against the run's hash
chain, decoded at the current version of each kind, a short payload met before decoded once."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventstore import EventStore, StoredEvent
from eventstore.chain import GENESIS
from eventstore.reading import checked_chunks, events_checked

from .facts import FACTS, Fact

__all__ = [
    "CHUNK",
    "SHARED",
    "bulk_reading",
    "decode",
    "decoded",
    "held_fields",
    "holding",
    "parsed_meta",
    "read_events",
    "read_rows",
    "row_chunks",
]

CHUNK = 4096
"""Facts and envelopes kept at most per read (decoded once each)."""


def read_events(
    store: EventStore,
    run_id: str,
    *,
    after: int = 0,
    upto: int | None = None,
    previous: str = GENESIS,
) -> Iterator[StoredEvent]:
    """The run's stored events with `after < seq <= upto`, in order, read a few thousand at a
    time (a long run is never held twice, as rows and as facts, at once), each checked against
    the run's hash chain first: `LogTampered` where the log was changed after it was written.
    From `after` > 0, `previous` is the hash of event `after` (read and checked before)."""
    return events_checked(store, run_id, after=after, upto=upto, previous=previous)


def decode(event: StoredEvent) -> Fact:
    """The fact stored in one event of the log, at the current version of its kind; a kind
    this process does not know (a user's own fact whose type is not registered here) is read
    whole as an `UnknownFact`. `UnreadableFact` (or `FactVersionTooNew`) names the run, seq
    and kind it cannot decode."""
    fact: Fact = FACTS.decode(
        event.payload,
        event.kind,
        event.version,
        run_id=event.run_id,
        seq=event.seq,
        custom=event.seq > 1 or event.meta.get("custom") is True,  # a run begins RunStarted
        meta=event.meta,
    )
    return fact


SHARED = 160
"""Payloads up to this length are decoded once per read: facts are frozen, so equal texts can
share one fact (a run records the same few transitions thousands of times)."""


def held_fields(kind: str) -> tuple[bool, bool] | None:
    """Whether a fact of `kind` takes fields from the envelope's state and from its step (its
    class-level `enveloped`, as the codec reads it), or None when it takes none: what its
    decoding depends on besides its payload. A transition takes its source state alone, so one
    decoding serves that transition at every step."""
    held = getattr(FACTS.models.get(kind), "enveloped", None) if FACTS.enveloped(kind) else None
    if not isinstance(held, dict):
        return None
    keys = set(held.values())
    if not keys <= {"state", "step"}:
        return True, True  # keyed by both, as every enveloped kind was
    return "state" in keys, "step" in keys


def holding(held: tuple[bool, bool] | None, state: Any, step: Any) -> tuple[Any, Any] | None:
    """The envelope's values that a fact's decoding depends on (see `held_fields`)."""
    if held is None:
        return None
    return state if held[0] else None, step if held[1] else None


def decoded(events: Iterable[StoredEvent]) -> Iterator[tuple[StoredEvent, Fact]]:
    """Each event with its fact (see `decode`), a short payload met before decoded once."""
    memo: dict[tuple[str, int, str, Any], Fact] = {}
    kinds: dict[str, tuple[bool, bool] | None] = {}
    for event in events:
        if len(event.payload) > SHARED:
            yield event, decode(event)
            continue
        meta, kind = event.meta, event.kind
        if kind not in kinds:
            kinds[kind] = held_fields(kind)
        held = holding(kinds[kind], meta.get("state"), meta.get("step"))
        key = (kind, event.version, event.payload, held)
        fact = memo.get(key)
        if fact is None:
            if len(memo) >= CHUNK:
                memo.clear()
            fact = memo[key] = decode(event)
        yield event, fact


def parsed_meta(meta: str | dict[str, Any]) -> dict[str, Any]:
    found = json.loads(meta) if isinstance(meta, str) else meta
    return found if isinstance(found, dict) else {}


def read_rows(
    store: EventStore, run_id: str, upto: int | None = None
) -> Iterator[tuple[int, str, int, str, Any, float]]:
    """The run's events up to seq `upto` as (seq, kind, version, payload, meta as text or
    parsed, recorded_at), in order, a few thousand at a time, each checked against the run's
    hash chain first (`LogTampered`); bare rows where the store reads them so."""
    for rows in checked_chunks(store, run_id, upto=upto):
        for seq, kind, version, payload, meta, at, _ in rows:
            yield seq, kind, version, payload, meta, at


def row_chunks(
    store: EventStore, run_id: str
) -> Iterator[Sequence[tuple[int, str, int, str, Any, float, str | None]]]:
    """`read_rows` of the whole run, a read at a time, each row with its hash last: for a
    reader that loops over the rows itself (a fold), a step less per fact."""
    return checked_chunks(store, run_id)


@contextmanager
def bulk_reading() -> Iterator[None]:
    """Pause the cyclic garbage collector while a whole run is read into memory: the many
    objects a read makes would start its collections over and over, each going through all
    of them, for nothing (reading makes no cycles). It runs again after, if it ran before."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
