"""Moving runs between databases as JSON lines: one line for the run, one per fact.

Each fact line carries the fact's hash; an import checks every line (it is JSON, its fact
decodes, its hash continues the run's chain) before it writes anything, so a file that is
damaged or was edited after export imports nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentsm import UnreadableFact
from agentsm.facts import FACTS
from eventstore import EventStore, NewEvent
from eventstore.chain import GENESIS, link

from .errors import ImportRefused
from .source import resolve_run

__all__ = ["export_run", "import_runs"]


def export_run(store: EventStore, run_id: str) -> Iterator[str]:
    """The run as JSON lines: its catalog entry, then every event with its envelope and hash."""
    record = store.run(resolve_run(store, run_id))
    yield json.dumps(
        {
            "type": "run",
            "run_id": record.run_id,
            "task": record.task,
            "status": record.status,
            "parent_id": record.parent_id,
            "branch_seq": record.branch_seq,
            "created_at": record.created_at,
            "info": record.info,
        }
    )
    for e in store.read(record.run_id):
        yield json.dumps(
            {
                "type": "event",
                "seq": e.seq,
                "kind": e.kind,
                "payload": json.loads(e.payload),
                "meta": e.meta,
                "recorded_at": e.recorded_at,
                "version": e.version,
                "hash": e.hash,
            }
        )


@dataclass
class _Run:
    line: int
    item: dict[str, Any]
    events: list[NewEvent] = field(default_factory=list)
    previous: str = GENESIS

    @property
    def run_id(self) -> str:
        return str(self.item["run_id"])


def _event(run: _Run, item: dict[str, Any]) -> NewEvent:
    """One fact line as an event to append, after checking its seq, fact and hash."""
    seq, kind, version = item.get("seq"), item.get("kind"), item.get("version", 1)
    expected = len(run.events) + 1
    if seq != expected:
        raise ValueError(f"seq {seq!r} where {expected} was due")
    if not isinstance(kind, str) or not isinstance(version, int):
        raise ValueError("a fact needs a kind (text) and a version (a whole number)")
    if not isinstance(item.get("meta"), dict) or not isinstance(
        item.get("recorded_at"), int | float
    ):
        raise ValueError("a fact needs its meta (an object) and recorded_at (a number)")
    payload = json.dumps(item.get("payload"), separators=(",", ":"), ensure_ascii=False)
    FACTS.decode(payload, kind, version, run_id=run.run_id, seq=seq)  # it must read back
    if seq == 1 and kind != "RunStarted":
        raise ValueError(f"run {run.run_id} begins with {kind}, not RunStarted")
    event = NewEvent(kind, payload, json.dumps(item["meta"]), item["recorded_at"], version)
    given = item.get("hash")
    if given is None:
        if run.previous != GENESIS:
            raise ValueError(f"seq {seq} ({kind}) has no hash, though the facts before it do")
        return event
    hashed = link(
        run.previous, run.run_id, seq, kind, version, payload, event.meta, event.recorded_at
    )
    if given != hashed:
        raise ValueError(
            f"the hash of seq {seq} ({kind}) does not match its fact and the chain before it: "
            "the file was changed after it was exported"
        )
    run.previous = hashed
    return event


def _parse(lines: Iterable[str], known: set[str]) -> list[_Run]:
    runs: list[_Run] = []
    number = 0
    try:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"not JSON ({e.msg}); is this an agentsm export?") from e
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "run":
                if not isinstance(item.get("run_id"), str) or not isinstance(item.get("task"), str):
                    raise ValueError("a run needs a run_id and a task (text)")
                run_id = item["run_id"]
                if run_id in known:
                    raise ValueError(f"run {run_id} exists already in this database")
                known.add(run_id)
                runs.append(_Run(number, item))
            elif kind == "event" and runs:
                runs[-1].events.append(_event(runs[-1], item))
            else:
                raise ValueError("neither a run nor one of its facts")
    except (ValueError, UnreadableFact) as e:
        raise ImportRefused(number, str(e)) from e
    for run in runs:
        if not run.events:
            raise ImportRefused(run.line, f"run {run.run_id} has no facts")
    return runs


def import_runs(store: EventStore, lines: Iterable[str]) -> list[str]:
    """Add the runs of an export to the store, in one transaction, and return their ids.
    Every line is checked first; a file with any bad line (not JSON, a fact that does not
    decode, a broken hash, a run that exists) raises `ImportRefused` naming the line, and
    nothing of it is imported."""
    runs = _parse(lines, {r.run_id for r in store.runs()})
    with store.batch():  # one transaction: the whole file or nothing of it
        for run in runs:
            store.create_run(
                run.run_id,
                run.item["task"],
                parent_id=run.item.get("parent_id"),
                branch_seq=run.item.get("branch_seq"),
                info=run.item.get("info") or {},
                created_at=run.item.get("created_at"),
                events=run.events,
                status=run.item.get("status", "imported"),
            )
    return [run.run_id for run in runs]
