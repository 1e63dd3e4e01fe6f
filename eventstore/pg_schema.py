"""The PostgreSQL schema of the event log: ordered migrations, applied under an advisory lock.

Every table lives in the store's own schema (`PostgresEventStore(schema=...)`), and
`eventstore_migrations` records which migrations ran. `migrate` takes a transaction-scoped
advisory lock on the schema's name first and reads the version inside that same transaction, so
any number of workers may open a new database at once: one creates the schema, the others wait
for it and find it done. To evolve the schema, append `(next version, name, statements)` to
`MIGRATIONS`; statements run in the caller's transaction and must not commit.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import psycopg
from psycopg import sql

from .errors import NotAnEventLog, SchemaVersionError

__all__ = ["BLOBS_SINCE", "CHANNEL", "LATEST", "MIGRATIONS", "channel", "migrate", "schema_version"]

CHANNEL = "agentsm_events"
"""The channel every schema's inserts into `events` NOTIFY, with the run id as payload (kept for
readers older than `channel`)."""


def channel(schema: str) -> str:
    """The channel only `schema`'s inserts NOTIFY: a watcher of one log is not woken by the
    appends of another log in the same database."""
    return f"{CHANNEL}_{hashlib.md5(schema.encode()).hexdigest()[:16]}"


_NOTIFY_PER_SCHEMA = f"""CREATE OR REPLACE FUNCTION events_notify() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}_' || left(md5(TG_TABLE_SCHEMA), 16), run_id),
            pg_notify('{CHANNEL}', run_id)
        FROM (SELECT DISTINCT run_id FROM inserted) AS r;
        RETURN NULL;
    END $$"""

_INITIAL = [
    """CREATE TABLE runs (
        run_id text PRIMARY KEY,
        task text NOT NULL,
        status text NOT NULL,
        parent_id text,
        branch_seq integer,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        last_seq integer NOT NULL DEFAULT 0,
        info text NOT NULL DEFAULT '{}',
        driver_host text,
        driver_pid integer,
        driver_started text,
        driver_token text,
        lease_until double precision,
        steps integer,
        input_tokens bigint NOT NULL DEFAULT 0,
        output_tokens bigint NOT NULL DEFAULT 0,
        cost double precision,
        model text,
        answer text,
        error text,
        entry bigint GENERATED ALWAYS AS IDENTITY
    )""",
    """CREATE TABLE events (
        run_id text NOT NULL REFERENCES runs (run_id),
        seq integer NOT NULL,
        kind text NOT NULL,
        payload text NOT NULL,
        meta text NOT NULL,
        recorded_at double precision NOT NULL,
        version integer NOT NULL,
        hash text NOT NULL,
        PRIMARY KEY (run_id, seq)
    )""",
    'CREATE INDEX runs_id_prefix ON runs ((run_id COLLATE "C"))',
    "CREATE INDEX runs_parent ON runs (parent_id)",
    "CREATE INDEX runs_status ON runs (status, updated_at)",
    "CREATE INDEX runs_created ON runs (created_at, entry)",
    "CREATE INDEX runs_updated ON runs (updated_at)",
    "CREATE INDEX runs_model ON runs (model)",
    # runs with facts but no summary yet (steps is NULL): logged before summaries were kept
    "CREATE INDEX runs_unsummarized ON runs (created_at, entry) WHERE steps IS NULL",
    # full-text search over the facts' payloads (`PostgresEventStore.search`)
    "CREATE INDEX events_search ON events USING gin (to_tsvector('simple', payload))",
    # Append-only, enforced by the database: no UPDATE, DELETE or TRUNCATE of facts; a fact goes
    # right after its run's last one (no gap, no second fact at one seq) into a run of the
    # catalog (the foreign key), and a run with facts keeps its place in the catalog.
    """CREATE FUNCTION events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'events are append-only: % is refused', TG_OP
            USING ERRCODE = 'restrict_violation';
    END $$""",
    """CREATE TRIGGER events_refuse_update BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION events_refuse_change()""",
    """CREATE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION events_refuse_change()""",
    """CREATE FUNCTION events_insert_at_end() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        IF NEW.seq IS DISTINCT FROM
                (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE run_id = NEW.run_id) THEN
            RAISE EXCEPTION 'events are append-only: seq % of run % does not follow its last fact',
                NEW.seq, NEW.run_id USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER events_insert_at_end BEFORE INSERT ON events
        FOR EACH ROW EXECUTE FUNCTION events_insert_at_end()""",
    f"""CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', run_id) FROM (SELECT DISTINCT run_id FROM inserted) AS r;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER events_notify AFTER INSERT ON events
        REFERENCING NEW TABLE AS inserted
        FOR EACH STATEMENT EXECUTE FUNCTION events_notify()""",
]

_FACT_TEXT_SEARCH = [
    # Search over the text of the facts, not their JSON: the words of each fact, made in Python
    # (`eventstore.fulltext`, as for SQLite) and written as a tsvector (no parser, no config),
    # by the next search of a store that may write; an insert into `events` only notes which
    # facts wait for it (`events_unindexed`), as cheap as an index entry. The JSON index goes.
    # (Each statement may run again: a schema whose migrations table was rolled back by hand.)
    "DROP INDEX IF EXISTS events_search",
    """CREATE TABLE IF NOT EXISTS events_words (
        run_id text NOT NULL,
        seq integer NOT NULL,
        kind text NOT NULL,
        recorded_at double precision NOT NULL,
        words tsvector NOT NULL,
        PRIMARY KEY (run_id, seq)
    )""",
    "CREATE INDEX IF NOT EXISTS events_words_search ON events_words USING gin (words)",
    # a search ranks the matches recorded last (a common word is read newest first from here)
    "CREATE INDEX IF NOT EXISTS events_words_recorded ON events_words (recorded_at, run_id, seq)",
    """CREATE TABLE IF NOT EXISTS events_unindexed (
        run_id text NOT NULL,
        seq integer NOT NULL,
        PRIMARY KEY (run_id, seq)
    )""",
    """CREATE OR REPLACE FUNCTION events_to_index() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        INSERT INTO events_unindexed (run_id, seq) SELECT run_id, seq FROM inserted;
        RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS events_to_index ON events",
    """CREATE TRIGGER events_to_index AFTER INSERT ON events
        REFERENCING NEW TABLE AS inserted
        FOR EACH STATEMENT EXECUTE FUNCTION events_to_index()""",
    # the facts logged before: indexed by the next search of a store that may write
    """INSERT INTO events_unindexed (run_id, seq) SELECT run_id, seq FROM events e
        WHERE NOT EXISTS (SELECT 1 FROM events_words w WHERE (w.run_id, w.seq) = (e.run_id, e.seq))
        ON CONFLICT DO NOTHING""",
]

_INBOX = [
    # Messages to a run from outside (`eventstore.Inbox`): anyone may post one, the run's
    # driver takes them; a message is never changed nor deleted, except `taken` (false to
    # true). An insert NOTIFYs the schema's inbox channel (`pg_inbox.inbox_channel`).
    """CREATE TABLE IF NOT EXISTS inbox (
        run_id text NOT NULL REFERENCES runs (run_id),
        n integer NOT NULL,
        kind text NOT NULL,
        payload text NOT NULL,
        posted_at double precision NOT NULL,
        taken boolean NOT NULL DEFAULT false,
        PRIMARY KEY (run_id, n)
    )""",
    """CREATE OR REPLACE FUNCTION inbox_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' OR (NEW.run_id, NEW.n, NEW.kind, NEW.payload, NEW.posted_at)
                IS DISTINCT FROM (OLD.run_id, OLD.n, OLD.kind, OLD.payload, OLD.posted_at)
                OR (OLD.taken AND NOT NEW.taken) THEN
            RAISE EXCEPTION 'inbox: a message is never changed nor deleted, only taken'
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NEW;
    END $$""",
    "DROP TRIGGER IF EXISTS inbox_refuse_change ON inbox",
    """CREATE TRIGGER inbox_refuse_change BEFORE UPDATE OR DELETE ON inbox
        FOR EACH ROW EXECUTE FUNCTION inbox_refuse_change()""",
    """CREATE OR REPLACE FUNCTION inbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('agentsm_inbox_' || left(md5(TG_TABLE_SCHEMA), 16), NEW.run_id);
        RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS inbox_notify ON inbox",
    """CREATE TRIGGER inbox_notify AFTER INSERT ON inbox
        FOR EACH ROW EXECUTE FUNCTION inbox_notify()""",
]

_BLOBS = [
    # Bytes stored once per content hash beside the log (`eventstore.blobs`): the images a
    # run sends or receives, which its facts refer to by digest. Written with the fact that
    # first refers to one, never changed nor deleted.
    """CREATE TABLE IF NOT EXISTS blobs (
        digest text PRIMARY KEY,
        media_type text NOT NULL,
        bytes bytea NOT NULL,
        size integer NOT NULL
    )""",
    """CREATE OR REPLACE FUNCTION blobs_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'blobs are append-only: % is refused', TG_OP
            USING ERRCODE = 'restrict_violation';
    END $$""",
    "DROP TRIGGER IF EXISTS blobs_refuse_change ON blobs",
    """CREATE TRIGGER blobs_refuse_change BEFORE UPDATE OR DELETE ON blobs
        FOR EACH ROW EXECUTE FUNCTION blobs_refuse_change()""",
    "DROP TRIGGER IF EXISTS blobs_refuse_truncate ON blobs",
    """CREATE TRIGGER blobs_refuse_truncate BEFORE TRUNCATE ON blobs
        FOR EACH STATEMENT EXECUTE FUNCTION blobs_refuse_change()""",
]

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "initial", _INITIAL),
    (2, "notify per schema", [_NOTIFY_PER_SCHEMA]),
    (3, "fact text search", _FACT_TEXT_SEARCH),
    (4, "inbox", _INBOX),
    (5, "blobs", _BLOBS),
]
LATEST = MIGRATIONS[-1][0]
BLOBS_SINCE = next(version for version, name, _ in MIGRATIONS if name == "blobs")
"""The schema version that added the blob table."""


def schema_version(conn: psycopg.Connection[tuple[Any, ...]], schema: str) -> int | None:
    """The schema's version: None when the schema holds no tables at all (a new log), 0 when it
    holds tables but no event log. Raises when the version is newer than this code knows."""
    tables = {
        row[0]
        for row in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        )
    }
    if not tables:
        return None
    if "eventstore_migrations" not in tables:
        return 0
    query = sql.SQL("SELECT COALESCE(MAX(version), 0) FROM {}.eventstore_migrations")
    row = conn.execute(query.format(sql.Identifier(schema))).fetchone()
    version = int(row[0]) if row else 0
    if version > LATEST:
        raise SchemaVersionError(
            f"Schema {schema!r} has event-log schema version {version}, newer than the "
            f"{LATEST} this version understands. Upgrade agentsm to read it."
        )
    return version


def migrate(conn: psycopg.Connection[tuple[Any, ...]], schema: str, where: str) -> None:
    """Create or bring the schema up to date inside the caller's open transaction, under an
    advisory lock so that concurrent openers apply each migration once. `where` names the
    database in messages (its URL without the password)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"agentsm:{schema}",))
    version = schema_version(conn, schema)
    if version == 0:
        raise NotAnEventLog(
            f"Schema {schema!r} of {where} holds tables but no agentsm event log; it was left "
            "untouched. Use another schema (?schema=name in the URL) for the log."
        )
    ident = sql.Identifier(schema)
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
    conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(ident))
    if version is None:
        conn.execute(
            "CREATE TABLE eventstore_migrations (version integer PRIMARY KEY, "
            "name text NOT NULL, applied_at double precision NOT NULL)"
        )
        version = 0
    for number, name, statements in MIGRATIONS:
        if number <= version:
            continue
        for statement in statements:
            conn.execute(statement.encode())
        conn.execute(
            "INSERT INTO eventstore_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
            (number, name, time.time()),
        )
