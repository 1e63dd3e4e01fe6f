"""Ordered schema migrations, applied with sqlite-utils and recorded in `eventstore_migrations`.

`PRAGMA user_version` holds the schema version; a database newer than `LATEST` is refused. To
evolve the schema, append `(next version, name, function)` to `MIGRATIONS`: `migrate` runs every
pending one inside the caller's single `BEGIN IMMEDIATE` transaction, so a function must not
commit. Read-only opens accept an older version, so keep what readers select working.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlite_utils

__all__ = ["LATEST", "MIGRATIONS", "migrate"]


def _m001_initial(db: sqlite_utils.Database) -> None:
    db["runs"].create(  # type: ignore[union-attr]
        {
            "run_id": str,
            "task": str,
            "status": str,
            "parent_id": str,
            "branch_seq": int,
            "created_at": float,
            "updated_at": float,
            "last_seq": int,
            "info": str,
        },
        pk="run_id",
        not_null={"task", "status", "created_at", "updated_at", "last_seq"},
        defaults={"last_seq": 0, "info": "{}"},
    )
    db["events"].create(  # type: ignore[union-attr]
        {
            "run_id": str,
            "seq": int,
            "kind": str,
            "payload": str,
            "meta": str,
            "recorded_at": float,
            "version": int,
        },
        pk=("run_id", "seq"),
        not_null={"kind", "payload", "meta", "recorded_at", "version"},
    )
    db["runs"].create_index(["parent_id"])  # type: ignore[union-attr]
    db.execute(
        "CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events BEGIN "
        "SELECT RAISE(ABORT, 'events are append-only: UPDATE is refused'); END"
    )
    db.execute(
        "CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events BEGIN "
        "SELECT RAISE(ABORT, 'events are append-only: DELETE is refused'); END"
    )


MIGRATIONS: list[tuple[int, str, Callable[[sqlite_utils.Database], None]]] = [
    (1, "initial", _m001_initial),
]
LATEST = MIGRATIONS[-1][0]


def migrate(db: sqlite_utils.Database, current: int) -> int:
    """Apply every migration newer than `current` in the caller's open transaction (which
    must have read `current` inside it), and return the new version."""
    if not db.conn.in_transaction:
        raise RuntimeError("migrate() runs inside the caller's BEGIN IMMEDIATE transaction")
    if "eventstore_migrations" not in db.table_names():
        db["eventstore_migrations"].create(  # type: ignore[union-attr]
            {"version": int, "name": str, "applied_at": float}, pk="version"
        )
    for version, name, apply in MIGRATIONS:
        if version <= current:
            continue
        apply(db)
        db["eventstore_migrations"].insert(  # type: ignore[union-attr]
            {"version": version, "name": name, "applied_at": time.time()}
        )
        db.execute(f"PRAGMA user_version = {version}")
        current = version
    return current
