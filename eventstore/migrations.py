"""Ordered schema migrations, applied with sqlite-utils and recorded in `eventstore_migrations`.

`PRAGMA user_version` holds the schema version; a database newer than `LATEST` is refused. To
evolve the schema, append `(next version, name, function)` to `MIGRATIONS`: `migrate` runs every
pending one inside the caller's single `BEGIN IMMEDIATE` transaction, so a function must not
commit. Read-only opens accept an older version, so keep what readers select working.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the caller hands the database in; listing a log never loads sqlite-utils
    import sqlite_utils

__all__ = ["FORMAT1", "LATEST", "MIGRATIONS", "log_format", "migrate"]


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


def _m002_append_only_inserts(db: sqlite_utils.Database) -> None:
    """Append-only for inserts too: a fact goes right after its run's last one (no REPLACE of
    an existing seq, whose implicit delete fires no delete trigger, and no gap), only into a run
    of the catalog; and the catalog keeps every run that has facts."""
    db.execute(
        "CREATE TRIGGER events_insert_at_end BEFORE INSERT ON events "
        "WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq), 0) + 1 FROM events "
        "WHERE run_id = NEW.run_id) "
        "OR NOT EXISTS (SELECT 1 FROM runs WHERE run_id = NEW.run_id) BEGIN "
        "SELECT RAISE(ABORT, 'events are append-only: a fact goes right after its run''s last "
        "one, into a run of the catalog'); END"
    )
    db.execute(
        "CREATE TRIGGER runs_insert_new BEFORE INSERT ON runs "
        "WHEN EXISTS (SELECT 1 FROM runs WHERE run_id = NEW.run_id) BEGIN "
        "SELECT RAISE(ABORT, 'runs: a run with this id exists already'); END"
    )
    db.execute(
        "CREATE TRIGGER runs_keep_logged_runs BEFORE DELETE ON runs "
        "WHEN EXISTS (SELECT 1 FROM events WHERE run_id = OLD.run_id) BEGIN "
        "SELECT RAISE(ABORT, 'runs: a run that has facts cannot leave the catalog'); END"
    )
    db.execute(
        "CREATE TRIGGER runs_keep_logged_ids BEFORE UPDATE OF run_id ON runs "
        "WHEN NEW.run_id IS NOT OLD.run_id "
        "AND EXISTS (SELECT 1 FROM events WHERE run_id = OLD.run_id) BEGIN "
        "SELECT RAISE(ABORT, 'runs: a run that has facts cannot change its id'); END"
    )


def _m003_event_hashes(db: sqlite_utils.Database) -> None:
    """Tamper evidence: every event gets a hash chained to its run's previous one (the store
    computes it on insert, see `eventstore.chain`). Events already logged keep no hash;
    `events_unhashed` records up to which seq of each run, so that no later event may lack one."""
    db.execute("ALTER TABLE events ADD COLUMN hash TEXT")
    db.execute("CREATE TABLE events_unhashed (run_id TEXT PRIMARY KEY, upto INTEGER NOT NULL)")
    db.execute("INSERT INTO events_unhashed SELECT run_id, MAX(seq) FROM events GROUP BY run_id")
    for action in ("INSERT", "UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER events_unhashed_refuse_{action.lower()} BEFORE {action} ON "
            f"events_unhashed BEGIN SELECT RAISE(ABORT, 'events_unhashed is fixed when "
            f"hashes begin: {action} is refused'); END"
        )


def _m004_run_drivers(db: sqlite_utils.Database) -> None:
    """Which process drives a run (host, pid, start time), its lease token and expiry."""
    for column, kind in (
        ("driver_host", "TEXT"),
        ("driver_pid", "INTEGER"),
        ("driver_started", "TEXT"),
        ("driver_token", "TEXT"),
        ("lease_until", "REAL"),
    ):
        db.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")


def _m005_run_summaries(db: sqlite_utils.Database) -> None:
    """What a listing shows of a run, kept in the catalog (written with its facts), and the
    indexes of the listing filters. Runs logged before have NULL `steps` until their summary is
    back-filled (by the agent side, which can fold them: see `agentsm.catalog.backfill`); a
    partial index finds them without scanning the catalog."""
    runs = db.table("runs")
    for column, kind in (
        ("steps", int),
        ("input_tokens", int),
        ("output_tokens", int),
        ("cost", float),
        ("model", str),
        ("answer", str),
        ("error", str),
    ):
        runs.add_column(column, kind)
    runs.create_index(["status", "updated_at"])
    runs.create_index(["updated_at"])
    runs.create_index(["created_at"])
    runs.create_index(["model"])
    db.execute("CREATE INDEX runs_unsummarized ON runs (run_id) WHERE steps IS NULL")


def _m006_event_search(db: sqlite_utils.Database) -> None:
    """Full-text search over the events' payloads: an FTS5 index with `events` as its content
    (the text is not stored twice), as sqlite-utils' `enable_fts(["payload"])` makes it (so
    `sqlite-utils search LOG events TEXT` reads it too; written as statements here, since its
    script would commit the migration's transaction half-way). It is derived data, kept off the
    append path: `events_indexed.upto` is the last event rowid indexed, and a search first
    indexes the events appended since (events are append-only, so rowids only grow)."""
    db.execute("CREATE VIRTUAL TABLE events_fts USING FTS5 (payload, content=[events])")
    db.execute("CREATE TABLE events_indexed (upto INTEGER NOT NULL)")
    db.execute("INSERT INTO events_indexed VALUES (0)")


def _m007_fact_text_search(db: sqlite_utils.Database) -> None:
    """Search over the text of the facts, not their JSON (`eventstore.fulltext`): the words of
    each fact, made in Python, in a contentless FTS5 table (`events_words`, rowid the event's)
    whose `ascii` tokenizer splits them where they were joined, so SQLite and PostgreSQL find
    the same words. The JSON index is dropped; `events_indexed.upto` starts again at 0, so the
    next search by a store that may write indexes every fact logged before (until then a search
    reads them one by one)."""
    db.execute("DROP TABLE IF EXISTS events_fts")
    db.execute("CREATE VIRTUAL TABLE events_words USING FTS5 (words, content='', tokenize='ascii')")
    db.execute("UPDATE events_indexed SET upto = 0")


def _m008_inbox(db: sqlite_utils.Database) -> None:
    """Messages to a run from outside (`Inbox`): anyone may post one, the run's driver takes
    them. A message is never changed nor deleted, except `taken`, which goes from 0 to 1."""
    db.execute(
        "CREATE TABLE inbox (run_id TEXT NOT NULL, n INTEGER NOT NULL, kind TEXT NOT NULL, "
        "payload TEXT NOT NULL, posted_at REAL NOT NULL, taken INTEGER NOT NULL DEFAULT 0, "
        "PRIMARY KEY (run_id, n))"
    )
    db.execute(
        "CREATE TRIGGER inbox_refuse_change BEFORE UPDATE ON inbox "
        "WHEN NEW.run_id IS NOT OLD.run_id OR NEW.n IS NOT OLD.n OR NEW.kind IS NOT OLD.kind "
        "OR NEW.payload IS NOT OLD.payload OR NEW.posted_at IS NOT OLD.posted_at "
        "OR NEW.taken < OLD.taken BEGIN "
        "SELECT RAISE(ABORT, 'inbox: a message is never changed, only taken'); END"
    )
    db.execute(
        "CREATE TRIGGER inbox_refuse_delete BEFORE DELETE ON inbox BEGIN "
        "SELECT RAISE(ABORT, 'inbox: a message is never deleted'); END"
    )


def _m009_blobs(db: sqlite_utils.Database) -> None:
    """Bytes stored once per content hash beside the log (`eventstore.blobs`): the images a
    run sends or receives, which its facts refer to by digest. Written with the fact that
    first refers to one, never changed nor deleted."""
    db.execute(
        "CREATE TABLE blobs (digest TEXT PRIMARY KEY, media_type TEXT NOT NULL, "
        "bytes BLOB NOT NULL, size INTEGER NOT NULL)"
    )
    for action in ("UPDATE", "DELETE"):
        db.execute(
            f"CREATE TRIGGER blobs_refuse_{action.lower()} BEFORE {action} ON blobs BEGIN "
            f"SELECT RAISE(ABORT, 'blobs are append-only: {action} is refused'); END"
        )


def _m010_log_format_2(db: sqlite_utils.Database) -> None:
    """Log format 2: facts packed into few, narrow rows (`eventstore.sqlite_format2`)."""
    from .sqlite_format2 import create_format2

    create_format2(db)


MIGRATIONS: list[tuple[int, str, Callable[[sqlite_utils.Database], None]]] = [
    (1, "initial", _m001_initial),
    (2, "append-only inserts", _m002_append_only_inserts),
    (3, "event hashes", _m003_event_hashes),
    (4, "run drivers", _m004_run_drivers),
    (5, "run summaries", _m005_run_summaries),
    (6, "event search", _m006_event_search),
    (7, "fact text search", _m007_fact_text_search),
    (8, "inbox", _m008_inbox),
    (9, "blobs", _m009_blobs),
    (10, "log format 2", _m010_log_format_2),
]
LATEST = MIGRATIONS[-1][0]
FORMAT1 = 9
"""The last schema of log format 1: a log of an earlier release is brought this far when it is
opened, and to format 2 (`LATEST`) only when asked (`SQLiteEventStore.upgrade`)."""


def log_format(version: int) -> int:
    """The log format of a schema version."""
    return 2 if version > FORMAT1 else 1


def migrate(db: sqlite_utils.Database, current: int, *, upto: int = LATEST) -> int:
    """Apply every migration newer than `current` (up to `upto`) in the caller's open
    transaction (which must have read `current` inside it), and return the new version."""
    if not db.conn.in_transaction:
        raise RuntimeError("migrate() runs inside the caller's BEGIN IMMEDIATE transaction")
    if "eventstore_migrations" not in db.table_names():
        db["eventstore_migrations"].create(  # type: ignore[union-attr]
            {"version": int, "name": str, "applied_at": float}, pk="version"
        )
    for version, name, apply in MIGRATIONS:
        if version <= current or version > upto:
            continue
        apply(db)
        db["eventstore_migrations"].insert(  # type: ignore[union-attr]
            {"version": version, "name": name, "applied_at": time.time()}
        )
        db.execute(f"PRAGMA user_version = {version}")
        current = version
    return current
