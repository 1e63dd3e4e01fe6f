"""Time travel: a run's memory and state at any sequence number, or at every one in one pass.

Memory is never stored: it is the fold of the log. Within a process, what a fold computed is
kept at checkpoints (every `CHECKPOINT` facts, for the few runs looked at last), so stepping
through a run folds each fact once and `memory_at` folds at most `CHECKPOINT` facts. The log is
append-only, so a checkpoint stays true; it is checked against the hash (or text) of its fact
before use, so a file replaced at the same path is folded again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from agentsm import AgentMemory, State
from agentsm.facts import Fact
from agentsm.memory import in_full, scan
from agentsm.trace import decoded, read_events
from eventstore import EventStore, StoredEvent
from eventstore.chain import GENESIS

from .errors import SeqOutOfRange
from .source import StoreLike, opened, resolve_run

__all__ = ["CHECKPOINT", "Moment", "memory_at", "moments"]

CHECKPOINT = 256
"""Facts between two memories kept for `memory_at` (per run, in this process only)."""

_RUNS = 8  # runs whose checkpoints are kept, the last looked at


class Moment(NamedTuple):
    """One fact of a run with the memory and state right after it."""

    seq: int
    fact: Fact
    memory: AgentMemory
    state: str


_Checkpoints = dict[int, tuple[str, AgentMemory, str]]
"""Memories of one run every CHECKPOINT facts: seq -> (mark of its fact, memory, state)."""

_cache: OrderedDict[tuple[str, str], _Checkpoints] = OrderedDict()
_lock = threading.Lock()


def _key(db: StoreLike, store: EventStore, run_id: str) -> tuple[str, str]:
    where = str(Path(db).resolve()) if isinstance(db, str | Path) else f"store {id(store)}"
    return where, run_id


def _checkpoints(key: tuple[str, str]) -> _Checkpoints:
    with _lock:
        found = _cache.pop(key, None)
        found = {} if found is None else found
        _cache[key] = found
        while len(_cache) > _RUNS:
            _cache.popitem(last=False)
        return found


def _mark(event: StoredEvent) -> str:
    """What identifies a fact of the log: its chained hash (which vouches for every fact
    before it), or its text in a log from before hashes."""
    return event.hash or f"{event.kind}:{event.payload}"


def _moments(
    store: EventStore, run_id: str, marks: _Checkpoints, start: int, upto: int | None
) -> Iterator[Moment]:
    """The moments of the run from seq `start` (or the closest checkpoint before it) on."""
    base = max((s for s in marks if s < start), default=0)
    memory: AgentMemory | None = None
    state: str = State.Idle
    after, previous = 0, GENESIS
    if base:
        mark, memory, state = marks[base]
        check = store.read(run_id, after=base - 1, upto=base)
        if check and _mark(check[0]) == mark:  # its hash goes on checking the chain from there
            after, previous = base, check[0].hash or GENESIS
        else:  # another log at this place now: forget what was folded of the old one
            marks.clear()
            memory, state = None, State.Idle
    current: list[StoredEvent] = []  # the event whose fact `scan` gives next

    def facts() -> Iterator[Fact]:
        events = read_events(store, run_id, after=after, upto=upto, previous=previous)
        for event, fact in decoded(events):
            current[:] = [event]
            yield fact

    before = memory
    for fact, after_fact, now in scan(facts(), memory, state):
        shown = in_full(fact, before) if before is not None else fact  # a call in full
        before = after_fact
        event = current[0]
        if event.seq % CHECKPOINT == 0:
            marks[event.seq] = (_mark(event), after_fact, now)
        if event.seq >= start:
            yield Moment(event.seq, shown, after_fact, now)


def moments(
    db: StoreLike, run_id: str, *, start: int = 1, upto: int | None = None
) -> Iterator[Moment]:
    """Every fact of a run from seq `start` to `upto` (default: the last) with the memory and
    state right after it, folding each fact once: `for seq, fact, memory, state in
    moments(db, run_id)` steps through a run in one pass."""
    with opened(db) as store:  # closed when the moments end or are let go (a path's store)
        run_id = resolve_run(store, run_id)
        marks = _checkpoints(_key(db, store, run_id))
        yield from _moments(store, run_id, marks, start, upto)


def memory_at(db: StoreLike, run_id: str, seq: int) -> tuple[AgentMemory, str]:
    """Memory and state right after fact `seq` of the run: folded from the closest checkpoint
    this process kept of the run (at most CHECKPOINT facts), else from the start."""
    with opened(db) as store:
        run_id = resolve_run(store, run_id)
        last = store.run(run_id).last_seq
        if not 1 <= seq <= last:
            raise SeqOutOfRange(run_id, seq, last)
        marks = _checkpoints(_key(db, store, run_id))
        *_, moment = _moments(store, run_id, marks, seq, seq)
        return moment.memory, moment.state
