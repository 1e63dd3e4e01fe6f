"""PostgreSQL backend of the event store: the same protocol and guarantees as SQLite, for many
writers on many hosts (psycopg 3 with a connection pool; append-only by trigger)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import psycopg

from .blobs import Blob
from .chain import GENESIS, ChainReport, blob_break, blob_refs_of, chained, check_chain
from .driver import RELEASED, Driver, hands_back
from .errors import (
    AmbiguousRunId,
    ConcurrencyError,
    NotAnEventLog,
    StoreError,
    UnknownRun,
)
from .fencing import lost_lease
from .pg_connections import Conn, Connections
from .pg_inbox import PgInbox
from .pg_leases import TAKEN, Leases
from .pg_schema import BLOBS_SINCE, LATEST, channel, migrate, schema_version
from .pg_search import Search
from .pg_url import DEFAULT_SCHEMA, check_schema_name, redact, split_schema
from .records import InboxMessage, NewEvent, RunRecord, RunSummary, StoredEvent
from .sqlite import DURABILITY, Durability
from .sqlite_catalog import run_record  # the catalog's rows, same columns
from .wakeups import committed

T = TypeVar("T")

__all__ = ["PostgresEventStore"]

_RUN_COLUMNS = (
    "run_id, task, status, created_at, updated_at, last_seq, parent_id, branch_seq, info, "
    "driver_host, driver_pid, driver_started, lease_until, "
    "steps, input_tokens, output_tokens, cost, model, answer, error"
)
_SUMMARY = ", ".join(
    f"{c} = %s"
    for c in ("steps", "input_tokens", "output_tokens", "cost", "model", "answer", "error")
)


class PostgresEventStore:
    """An event log in a PostgreSQL schema, shared by any number of processes and hosts.

    `url` is a libpq URL (`postgresql://user:password@host:5432/dbname`); the log's tables live
    in `schema` (default "agentsm", or `?schema=name` in the URL), created with its migrations
    on first use unless `create=False`. `read_only=True` opens every connection read-only.
    `durability`, as for SQLite: `"normal"` commits without waiting for the server's disk
    (`synchronous_commit = off`: what is committed survives a killed agent process; a crash of
    the server or its machine may lose the last fraction of a second); `"full"` also makes each
    commit that an effect follows (`durable=True`) wait for the disk. A run's writer
    `claim`s it first, with a lease of `lease` seconds that this store renews while it holds
    the run. `pool_size` bounds the connections this store opens. An operation that meets a
    dropped connection, a server restart or a serialization failure is tried again for up to
    `retry` seconds (an append whose commit may have happened is checked first, never doubled).
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        create: bool = True,
        read_only: bool = False,
        durability: Durability = "normal",
        lease: float = 60.0,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
        retry: float = 30.0,
    ) -> None:
        conninfo, in_url = split_schema(url)
        self.url = redact(url)
        self.schema = check_schema_name(schema or in_url or DEFAULT_SCHEMA)
        self.read_only = read_only
        self.durability = durability
        self._db = Connections(
            conninfo,
            self.url,
            self.schema,
            read_only=read_only,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            retry=retry,
        )
        self._blobbed = True  # whether the schema has the blob table (an old one read as is)
        with self._db.connect() as conn:
            self._open_schema(conn, create and not read_only)
        self._db.open_pool()
        self._heads: dict[str, tuple[int, str]] = {}  # run id -> seq and hash of its last fact
        self._writers: ThreadPoolExecutor | None = None  # the threads of the awaited writes
        self._writers_lock = threading.Lock()
        self._pool_size = pool_size
        self._leases = Leases(self._db, lease, functools.partial(_unknown, self._db))
        self._search = Search(self._db, read_only=read_only)
        self._inbox = PgInbox(
            self._db,
            self.schema,
            self._leases.tokens,
            self._leases.refused,
            functools.partial(_unknown, self._db),
        )

    def _open_schema(self, conn: Conn, create: bool) -> None:
        """Check the schema; create or migrate it (`pg_schema.migrate`) when allowed."""
        try:
            version = schema_version(conn, self.schema)
            if version == LATEST:
                return
            if version is None and not create:
                raise NotAnEventLog(
                    f"Schema {self.schema!r} of {self.url} holds no agentsm event log. Check "
                    "the URL (--db / AGENTSM_DB) and its ?schema=, or record a run into it first."
                )
            if version == 0:
                raise NotAnEventLog(
                    f"Schema {self.schema!r} of {self.url} holds tables but no agentsm event "
                    "log; it was left untouched. Use another schema (?schema=name in the URL)."
                )
            if self.read_only:
                self._blobbed = version is not None and version >= BLOBS_SINCE
                return  # a reader takes an older schema as it is
            with conn.transaction():
                migrate(conn, self.schema, self.url)
        except psycopg.Error as e:
            raise StoreError(f"Could not open the event log in {self.url} ({e}).") from e

    # -- catalog ---------------------------------------------------------------------------

    def create_run(
        self,
        run_id: str,
        task: str,
        *,
        parent_id: str | None = None,
        branch_seq: int | None = None,
        info: dict[str, Any] | None = None,
        created_at: float | None = None,
        events: Sequence[NewEvent] = (),
        status: str | None = None,
        summary: RunSummary | None = None,
        claim: bool = False,
    ) -> RunRecord:
        """Add a run to the catalog together with its first `events`, in one transaction, so
        that no reader ever sees it without them; an id that exists already is a
        `ConcurrencyError` and writes nothing. With `claim`, this store drives the new run from
        the same transaction on (no worker can take a running run before it is claimed)."""
        now = time.time() if created_at is None else created_at
        record = RunRecord(
            run_id=run_id,
            task=task,
            status=status or "created",
            created_at=now,
            updated_at=events[-1].recorded_at if events else now,
            last_seq=len(events),
            parent_id=parent_id,
            branch_seq=branch_seq,
            info=json.loads(json.dumps(info or {})),
            summary=RunSummary(*_summary_values(summary)) if summary is not None else RunSummary(),
        )
        kept = (
            _summary_values(summary)
            if summary is not None
            else [None, 0, 0, None, None, None, None]
        )
        columns, head = _chain(run_id, GENESIS, 0, events)
        blobs = _blob_columns(events)
        exists = f"A run with id {run_id!r} exists already; choose another id."
        driver, token = self._leases.taken() if claim else ([None] * 5, None)
        values = (
            run_id,
            task,
            record.status,
            now,
            record.updated_at,
            len(events),
            parent_id,
            branch_seq,
            json.dumps(info or {}),
            *kept,
            *driver,
        )

        def create(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO runs (run_id, task, status, created_at, updated_at, last_seq, "
                "parent_id, branch_seq, info, steps, input_tokens, output_tokens, cost, "
                f"model, answer, error, {TAKEN}) VALUES ({', '.join(['%s'] * len(values))})",
                values,
            )
            if events:
                conn.execute(_INSERT.format(where="").encode(), (run_id, *columns))
            if blobs[0]:
                conn.execute(_STORE_BLOBS.format(where="").encode(), blobs)

        def committed() -> bool:  # the first try's commit may have happened: is it stored?
            found = self._db.rows(
                "SELECT driver_token, last_seq FROM runs WHERE run_id = %s", (run_id,)
            )
            return bool(found) and found[0][0] == token and self._stored(run_id, len(events), head)

        self._db.transact(
            f"create run {run_id!r}", create, pipeline=True, conflict=exists, committed=committed
        )
        if token is not None:
            self._leases.hold(run_id, token)
        self._remember(run_id, len(events), head)
        return record

    def run(self, run_id: str) -> RunRecord:
        """The catalog entry of one run; `UnknownRun` names the closest ids when it is missing."""
        rows = self._db.rows(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = %s", (run_id,))
        if not rows:
            raise UnknownRun(run_id, _closest(self._db, run_id))
        return run_record(rows[0])

    def resolve(self, run_id_or_prefix: str) -> str:
        """The exact id, else the one id starting with it, else `UnknownRun` (with the closest
        ids) or `AmbiguousRunId`."""
        if self._db.rows("SELECT 1 FROM runs WHERE run_id = %s", (run_id_or_prefix,)):
            return run_id_or_prefix
        matches = _prefixed(self._db, run_id_or_prefix)
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise AmbiguousRunId(run_id_or_prefix, matches)
        raise UnknownRun(run_id_or_prefix, _closest(self._db, run_id_or_prefix))

    def runs(
        self,
        *,
        status: str | None = None,
        model: str | None = None,
        task: str | None = None,
        since: float | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        parents: Sequence[str] | None = None,
    ) -> list[RunRecord]:
        """The runs of the catalog that pass every filter given, oldest first (or newest first):
        `task` is a case-insensitive substring, `since` an epoch time the last fact is at or
        after, `parents` the ids one of which is the run's parent."""
        where: list[str] = []
        args: list[Any] = []
        if parents is not None:
            if not parents:
                return []
            where.append("parent_id = ANY(%s)")
            args.append(list(parents))
        for column, value in (("status", status), ("model", model)):
            if value is not None:
                where.append(f"{column} = %s")
                args.append(value)
        if task is not None:
            unicode = self._unicode_collation()
            where.append(f"strpos(lower(task{unicode}), lower(%s::text{unicode})) > 0")
            args.append(task)
        if since is not None:
            where.append("updated_at >= %s")
            args.append(since)
        query = f"SELECT {_RUN_COLUMNS} FROM runs"
        if where:
            query += " WHERE " + " AND ".join(where)
        order = "DESC" if newest_first else "ASC"
        query += f" ORDER BY created_at {order}, entry {order}"
        if limit is not None:
            query += " LIMIT %s"
            args.append(max(0, limit))
        return [run_record(r) for r in self._db.rows(query, args)]

    def _unicode_collation(self) -> str:
        """A COLLATE clause under which `lower` knows every letter (ICU's root locale), when
        the server has ICU: a database made with LC_CTYPE=C lowercases ASCII letters only."""
        if not hasattr(self, "_collate"):
            found = self._db.rows("SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu'")
            self._collate = ' COLLATE "und-x-icu"' if found else ""
        return self._collate

    def set_status(self, run_id: str, status: str) -> None:
        """Change a run's status in the catalog (the catalog is not the log: it may change).
        From the run's driver, the change carries its lease token, as its appends do."""
        token = self._leases.tokens.for_write(run_id)
        query = "UPDATE runs SET status = %s, updated_at = %s WHERE run_id = %s"
        args: list[Any] = [status, time.time(), run_id]
        if token is not None:
            query += " AND driver_token = %s"
            args.append(token)
        if not self._db.execute(f"set the status of run {run_id!r}", query.encode(), args):
            self._refuse_append(run_id, -1, token)

    def set_summary(self, run_id: str, summary: RunSummary) -> None:
        """Write a run's summary in the catalog (a back-fill: a recorder writes it with the
        facts, through `create_run` and `append`)."""
        written = self._db.execute(
            f"write the summary of run {run_id!r}",
            f"UPDATE runs SET {_SUMMARY} WHERE run_id = %s".encode(),
            (*_summary_values(summary), run_id),
        )
        if not written:
            raise UnknownRun(run_id, _closest(self._db, run_id))

    def unsummarized(self) -> list[str]:
        """The runs with facts but no summary in the catalog (copied from a log that kept
        none), oldest first; the agent side folds them once."""
        rows = self._db.rows(
            "SELECT run_id FROM runs WHERE steps IS NULL AND last_seq > 0 "
            "ORDER BY created_at, entry"
        )
        return [r[0] for r in rows]

    # -- the log ---------------------------------------------------------------------------

    def append(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[NewEvent],
        *,
        status: str | None = None,
        durable: bool = False,
        summary: RunSummary | None = None,
    ) -> int:
        """Append `events` after `expected_seq` in one transaction; returns the new last seq.
        Only the run's driver (this store, once it has claimed it) may append, and only at the
        run's end: otherwise `ConcurrencyError`, and nothing is written. The catalog update and
        the inserts are one statement, a transaction of its own: one round trip."""
        last = expected_seq + len(events)
        token = self._leases.tokens.for_write(run_id)  # a lost run: refused before the database
        sets = "last_seq = %s, updated_at = %s"
        params: list[Any] = [last, events[-1].recorded_at if events else time.time()]
        release = hands_back(status) and not self._db.in_batch()
        if status is not None:
            sets += ", status = %s"
            params.append(status)
            if release:  # released in the same statement
                sets += ", " + RELEASED
        if summary is not None:
            sets += ", " + _SUMMARY
            params += _summary_values(summary)
        moved = (
            f"UPDATE runs SET {sets} WHERE run_id = %s AND last_seq = %s "
            "AND driver_token IS NOT DISTINCT FROM %s"
        )
        params += [run_id, expected_seq, token]
        head = GENESIS
        if events:
            columns, head = _chain(run_id, self._head(run_id, expected_seq), expected_seq, events)
            moved_only = "WHERE EXISTS (SELECT FROM moved)"
            query = f"WITH moved AS ({moved} RETURNING 1) "
            blobs = _blob_columns(events)
            if blobs[0]:  # stored in the same statement, once per digest
                query += ", stored AS (" + _STORE_BLOBS.format(where=moved_only) + ") "
                params += blobs
            query += _INSERT.format(where=moved_only)
            params += [run_id, *columns]
        else:
            query = moved
        conflict = (
            f"Another writer appended to run {run_id!r} at seq {expected_seq + 1} first. "
            "Nothing was written; reload the run."
        )

        def committed() -> bool:  # the first try's commit may have happened: is it stored?
            if events:
                return self._stored(run_id, last, head)
            found = self._db.rows(
                "SELECT status, driver_token FROM runs WHERE run_id = %s", (run_id,)
            )
            return bool(found) and found[0][0] == status and (found[0][1] is None) == release

        written = self._db.execute(
            f"append to run {run_id!r}",
            query.encode(),
            params,
            wait_for_disk=durable and self._durability == "full",
            conflict=conflict,
            committed=committed,
        )
        if written == 0:
            self._refuse_append(run_id, expected_seq, token)
        if release:
            self._leases.tokens.hand_back(run_id)
        if events:
            self._remember(run_id, last, head)
        return last

    # -- awaited writes: AsyncAppend and AsyncDrive -----------------------------------------

    async def append_async(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[NewEvent],
        *,
        status: str | None = None,
        durable: bool = False,
        summary: RunSummary | None = None,
    ) -> int:
        """`append` for async code: the round trip to the server runs on a thread of this
        store's own while the event loop goes on (see `_awaited`)."""
        return await self._awaited(
            lambda: self.append(
                run_id, expected_seq, events, status=status, durable=durable, summary=summary
            )
        )

    async def create_run_async(
        self,
        run_id: str,
        task: str,
        *,
        created_at: float | None = None,
        events: Sequence[NewEvent] = (),
        status: str | None = None,
        summary: RunSummary | None = None,
        claim: bool = False,
    ) -> None:
        """`create_run` for async code, off the event loop."""

        await self._awaited(
            lambda: self.create_run(
                run_id,
                task,
                created_at=created_at,
                events=events,
                status=status,
                summary=summary,
                claim=claim,
            )
        )

    async def claim_async(self, run_id: str, *, force: bool = False) -> None:
        """`claim` for async code, off the event loop."""
        await self._awaited(lambda: self.claim(run_id, force=force))

    async def release_async(self, run_id: str) -> None:
        """`release` for async code; nothing to wait for when the run is not held (an append
        that handed it back released it already)."""
        if self._leases.tokens.get(run_id) is not None:
            await self._awaited(lambda: self.release(run_id))

    async def _awaited(self, work: Callable[[], T]) -> T:
        """`work` (a write) run on a thread of this store's own, awaited without blocking the
        event loop; inside this thread's `batch()`, run here, as part of it. If the awaiting
        task is cancelled, the write still ends whole or not at all, and the cancellation is
        raised once it is known which."""
        if self._db.in_batch():
            return work()
        with self._writers_lock:
            if self._db.closed:
                raise StoreError(f"The store {self.url!r} is closed; open it again.")
            if self._writers is None:
                self._writers = ThreadPoolExecutor(
                    max_workers=max(2, self._pool_size), thread_name_prefix="agentsm-pg-writer"
                )
            write = self._writers.submit(work)
        return await committed(write)

    def _remember(self, run_id: str, seq: int, head: str) -> None:
        """Keep the hash of the run's last fact for its next append, once committed (a batch
        may still roll back: then the next append reads it)."""
        if self._db.in_batch():
            self._heads.pop(run_id, None)
        elif seq:
            self._heads[run_id] = (seq, head)

    def _head(self, run_id: str, seq: int) -> str:
        """The hash of fact `seq` of the run (the one this store appended last, or read)."""
        known = self._heads.get(run_id)
        if known is not None and known[0] == seq:
            return known[1]
        if seq == 0:
            return GENESIS
        rows = self._db.rows(
            "SELECT hash FROM events WHERE run_id = %s AND seq = %s", (run_id, seq)
        )
        return str(rows[0][0]) if rows else GENESIS  # no such fact: the append is refused

    def _stored(self, run_id: str, seq: int, head: str) -> bool:
        """Whether fact `seq` of the run is stored with hash `head` (a write that committed)."""
        if seq == 0:
            return True
        found = self._db.rows(
            "SELECT hash FROM events WHERE run_id = %s AND seq = %s", (run_id, seq)
        )
        return bool(found) and found[0][0] == head

    def _refuse_append(self, run_id: str, expected_seq: int, token: str | None) -> None:
        """Say why an append moved no run: unknown, taken over (the run is fenced), or behind
        the log."""
        rows = self._db.rows(
            "SELECT last_seq, driver_token, driver_host, driver_pid FROM runs WHERE run_id = %s",
            (run_id,),
        )
        found = rows[0] if rows else None
        if found is None:
            raise UnknownRun(run_id, _closest(self._db, run_id))
        if found[1] != token:
            holder = str(Driver(found[2], found[3])) if found[1] else "no process"
            if token is None:  # this store never drove it: someone else does
                raise ConcurrencyError(
                    f"Run {run_id!r} is driven by {holder}; this store has not claimed it. "
                    "Nothing was written."
                )
            raise self._leases.tokens.lose(run_id, lost_lease(run_id, holder))
        raise ConcurrencyError(
            f"Run {run_id!r} is at seq {found[0]}, not {expected_seq}: another "
            "writer appended first. Nothing was written; reload the run."
        )

    def read(self, run_id: str, *, after: int = 0, upto: int | None = None) -> list[StoredEvent]:
        """The run's events with `after < seq <= upto`, in order."""
        query = (
            "SELECT run_id, seq, kind, payload, meta, recorded_at, version, hash "
            "FROM events WHERE run_id = %s AND seq > %s"
        )
        args: list[Any] = [run_id, after]
        if upto is not None:
            query += " AND seq <= %s"
            args.append(upto)
        rows = self._db.rows(query + " ORDER BY seq", args)
        if not rows and after == 0:
            self.run(run_id)
        return [_stored(r) for r in rows]

    def read_payloads(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> list[tuple[int, str, int, str, str, float]]:
        """The run's events with `after < seq <= upto`, in order, as (seq, kind, version,
        payload, meta text, recorded_at) rows, nothing parsed (see `PayloadReader`)."""
        return self._bare(run_id, after, upto, "")

    def read_chained(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> list[tuple[int, str, int, str, str, float, str | None]]:
        """`read_payloads` with each event's hash last, for a reader that checks the chain
        (`eventstore.reading.ChainedReader`)."""
        return self._bare(run_id, after, upto, ", hash")

    def _bare(self, run_id: str, after: int, upto: int | None, more: str) -> list[Any]:
        query = (
            f"SELECT seq, kind, version, payload, meta, recorded_at{more} FROM events "
            "WHERE run_id = %s AND seq > %s"
        )
        args: list[Any] = [run_id, after]
        if upto is not None:
            query += " AND seq <= %s"
            args.append(upto)
        rows = self._db.rows(query + " ORDER BY seq", args)
        if not rows and after == 0:
            self.run(run_id)
        return [tuple(r) for r in rows]

    def events_of(self, kinds: Sequence[str], *, since: float | None = None) -> list[StoredEvent]:
        """Every event of these kinds, of any run, recorded at or after `since` (one pass over
        the log, for counts across runs)."""
        query = (
            "SELECT run_id, seq, kind, payload, meta, recorded_at, version, hash FROM events "
            "WHERE kind = ANY(%s)"
        )
        args: list[Any] = [list(kinds)]
        if since is not None:
            query += " AND recorded_at >= %s"
            args.append(since)
        return [_stored(r) for r in self._db.rows(query, args)]

    def search(
        self, text: str, *, kinds: Sequence[str] | None = None, limit: int = 50
    ) -> list[tuple[str, int, str, str]]:
        """The facts whose text holds every term of `text` (words, phrases, `prefix*`), best
        first, with their matching text: see `eventstore.pg_search`."""
        return self._search.search(text, kinds=kinds, limit=limit)

    def index_for_search(self, *, batch: int = 5000) -> int:
        """Index the facts appended since the last search; how many (none when read-only)."""
        return self._search.index(batch=batch)

    def unindexed(self) -> int:
        """How many facts the full-text index does not hold yet."""
        return self._search.unindexed()

    def verify(self, run_id: str) -> ChainReport:
        """Check the hash chain of a run: the first broken link, if any (see `eventstore.chain`),
        else the first fact that refers to a blob missing or changed (`eventstore.blobs`)."""
        record = self.run(run_id)
        events = self.read(run_id)
        report = check_chain(run_id, events, last_seq=record.last_seq)
        if report.ok and (digests := blob_refs_of(events)):
            broken = blob_break(events, self.blobs(digests))
            if broken is not None:
                return dataclasses.replace(report, broken=broken)
        return report

    def blobs(self, digests: Sequence[str]) -> dict[str, Blob]:
        """The blobs of these digests the log holds, by digest (see `eventstore.blobs`)."""
        wanted = list(dict.fromkeys(digests))
        if not wanted or not self._blobbed:
            return {}
        rows = self._db.rows(
            "SELECT digest, media_type, bytes FROM blobs WHERE digest = ANY(%s)", (wanted,)
        )
        return {r[0]: Blob(r[0], r[1], bytes(r[2])) for r in rows}

    def batch(self) -> AbstractContextManager[None]:
        """Make every write of this thread inside the block one transaction: all of it is
        committed at the end, or none of it if anything raises (an import of several runs)."""
        return self._db.batch()

    # -- the inbox: messages to a run from outside ---------------------------------------------

    def post(self, run_id: str, kind: str, payload: str) -> int:
        """Queue a message for the run (see `Inbox`); returns its number, the run's next."""
        return self._inbox.post(run_id, kind, payload)

    def pending(self, run_id: str) -> list[InboxMessage]:
        """The run's messages not taken yet, oldest first (a round trip only when something
        was posted to it since it was last found to have none: see `eventstore.pg_inbox`)."""
        return self._inbox.pending(run_id)

    def take(self, run_id: str, upto: int) -> None:
        """Mark the run's messages up to `upto` taken: from its driver only (see `Inbox`)."""
        self._inbox.take(run_id, upto)

    # -- who drives a run -------------------------------------------------------------------

    def claim(self, run_id: str, *, force: bool = False) -> None:
        """Record this process as the run's driver, with a lease this store renews, so that
        its appends are accepted and a late one from a superseded driver is not. A run driven
        by another live process (same host: its pid runs with the same start time; other
        host: its lease has not expired) is refused with `RunInUse`, unless `force`."""
        self._leases.claim(run_id, force=force)

    def claim_next(
        self, *, kinds: Sequence[str] = ("queued", "ready", "orphaned")
    ) -> RunRecord | None:
        """Claim one run that can go on, oldest `updated_at` first, and return its record (None
        when there is none): "queued" (submitted to run later), "ready" (a human decision has
        arrived) and "orphaned" (running, but its driver's lease has run out). Concurrent
        callers never get the same run (`FOR UPDATE SKIP LOCKED`)."""
        taken = self._leases.claim_next(kinds)
        if taken is None:
            return None
        return dataclasses.replace(self.run(taken[0]), previous=taken[1])

    def release(self, run_id: str) -> None:
        """Stop driving the run: the catalog no longer names this process (if it still did)."""
        self._leases.release(run_id)

    # -- following appends -------------------------------------------------------------------

    def wait_for_append(self, timeout: float) -> bool:
        """Block up to `timeout` seconds until some run of the store may have new events (True)
        or the time is up (False), by LISTENing to the channel the events table NOTIFYs. The
        first call starts listening and returns True at once: what came before, read it."""
        return self._db.wait_for_notify(channel(self.schema), timeout)

    # -- settings and lifetime ---------------------------------------------------------------

    @property
    def lease(self) -> float:
        """Seconds a claim holds a run without renewal; this store renews every third of it."""
        return self._leases.lease

    @property
    def durability(self) -> Durability:
        """`"normal"` or `"full"`: see the class docstring; may be changed at any time."""
        return self._durability

    @durability.setter
    def durability(self, value: Durability) -> None:
        if value not in DURABILITY:
            raise StoreError(
                f"durability must be one of {', '.join(map(repr, DURABILITY))}, not {value!r}."
            )
        self._durability: Durability = value

    def close(self) -> None:
        """Close the connections (the runs it drives keep their record of this process until
        it exits or its leases run out); the store cannot be used afterwards."""
        if self._db.closed:
            return
        with self._writers_lock:
            writers, self._writers = self._writers, None
        if writers is not None:
            writers.shutdown(wait=True)  # the awaited writes under way end first
        self._leases.close()
        self._inbox.close()
        self._db.close()

    def __enter__(self) -> PostgresEventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresEventStore({self.url!r}, schema={self.schema!r})"


def _prefixed(db: Connections, prefix: str) -> list[str]:
    """The ids starting with `prefix`, through the index on the ids."""
    if not prefix:
        return []
    rows = db.rows(
        'SELECT run_id FROM runs WHERE run_id COLLATE "C" >= %s '
        'AND run_id COLLATE "C" < %s AND starts_with(run_id, %s) ORDER BY run_id',
        (prefix, prefix + "\U0010ffff", prefix),
    )
    return [r[0] for r in rows]


def _closest(db: Connections, run_id: str) -> list[str]:
    """The ids to suggest for an unknown one: those it begins, else those that look alike."""
    prefixed = _prefixed(db, run_id)
    if prefixed:
        return prefixed
    ids = [r[0] for r in db.rows("SELECT run_id FROM runs")]
    return difflib.get_close_matches(run_id, ids, n=3)


def _unknown(db: Connections, run_id: str) -> UnknownRun:
    return UnknownRun(run_id, _closest(db, run_id))


SUMMARY_TEXT = 200
"""How much of the final answer and of the error the catalog keeps."""


def _summary_values(s: RunSummary) -> list[Any]:
    def cut(text: str | None) -> str | None:
        return text[:SUMMARY_TEXT] if text is not None else None

    return [s.steps, s.input_tokens, s.output_tokens, s.cost, s.model, cut(s.answer), cut(s.error)]


_INSERT = (
    "INSERT INTO events (run_id, seq, kind, payload, meta, recorded_at, version, hash) "
    "SELECT %s::text, u.* FROM unnest(%s::integer[], %s::text[], %s::text[], %s::text[], "
    "%s::double precision[], %s::integer[], %s::text[]) AS u(seq) {where} ORDER BY u.seq"
)


_STORE_BLOBS = (
    "INSERT INTO blobs (digest, media_type, bytes, size) SELECT u.* FROM unnest(%s::text[], "
    "%s::text[], %s::bytea[], %s::integer[]) AS u(digest) {where} ON CONFLICT (digest) DO NOTHING"
)


def _blob_columns(events: Sequence[NewEvent]) -> list[list[Any]]:
    """The columns of the blobs `events` carry (for `_STORE_BLOBS`), each digest once."""
    columns: list[list[Any]] = [[], [], [], []]
    seen: set[str] = set()
    for e in events:
        for b in e.blobs:
            if b.digest not in seen:
                seen.add(b.digest)
                for column, value in zip(
                    columns, (b.digest, b.media_type, b.data, b.size), strict=True
                ):
                    column.append(value)
    return columns


def _chain(
    run_id: str, previous: str, after: int, events: Sequence[NewEvent]
) -> tuple[list[list[Any]], str]:
    """The columns of `events` to insert after seq `after` (for `_INSERT`), each hash chained
    to the one before, and the last hash."""
    columns: list[list[Any]] = [[], [], [], [], [], [], []]
    for seq, e in enumerate(events, start=after + 1):
        previous = chained(previous, run_id, seq, e)
        for column, value in zip(
            columns,
            (seq, e.kind, e.payload, e.meta, e.recorded_at, e.version, previous),
            strict=True,
        ):
            column.append(value)
    return columns, previous


def _stored(r: tuple[Any, ...]) -> StoredEvent:
    return StoredEvent(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7])
