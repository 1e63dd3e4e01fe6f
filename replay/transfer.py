"""Moving runs between databases as JSON lines: one line for the run, one per fact."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from eventstore import EventStore, NewEvent, StoreError

from .source import resolve_run

__all__ = ["export_run", "import_runs"]


def export_run(store: EventStore, run_id: str) -> Iterator[str]:
    """The run as JSON lines: its catalog entry, then every event with its envelope."""
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
            }
        )


def import_runs(store: EventStore, lines: Iterable[str]) -> list[str]:
    """Add the runs of an export to the store, each with its facts in one transaction; returns
    their ids."""
    runs: list[tuple[dict[str, Any], list[NewEvent]]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise StoreError(f"line {number} is not JSON ({e}); is this an agentsm export?") from e
        if item.get("type") == "run":
            runs.append((item, []))
        elif item.get("type") == "event" and runs:
            expected = len(runs[-1][1]) + 1
            if item["seq"] != expected:
                raise StoreError(f"line {number}: seq {item['seq']} where {expected} was due.")
            runs[-1][1].append(
                NewEvent(
                    item["kind"],
                    json.dumps(item["payload"], separators=(",", ":"), ensure_ascii=False),
                    json.dumps(item["meta"]),
                    item["recorded_at"],
                    item.get("version", 1),
                )
            )
        else:
            raise StoreError(f"line {number} is neither a run nor one of its events.")
    for run, events in runs:
        store.create_run(
            run["run_id"],
            run["task"],
            parent_id=run.get("parent_id"),
            branch_seq=run.get("branch_seq"),
            info=run.get("info") or {},
            created_at=run.get("created_at"),
            events=events,
            status=run.get("status", "imported"),
        )
    return [run["run_id"] for run, _ in runs]
