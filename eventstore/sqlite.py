"""SQLite backend of the event store: WAL, writes committed (grouped) by a writer thread, and
append-only by trigger."""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from . import fulltext
from .blobs import Blob
from .chain import GENESIS, ChainReport, blob_break, blob_refs_of, chained, check_chain
from .driver import CLAIM_ORDER, RELEASED, Driver, hands_back, refuse_live_driver
from .errors import (
    AmbiguousRunId,
    ConcurrencyError,
    NotAnEventLog,
    SchemaVersionError,
    StoreError,
    UnknownRun,
)
from .fencing import Tokens, lost_lease
from .migrations import FORMAT1, LATEST, log_format, migrate
from .records import SUMMARY_TEXT, InboxMessage, NewEvent, RunRecord, RunSummary, StoredEvent
from .sqlite_catalog import (
    DRIVER_COLUMNS,
    NO_DRIVER_COLUMNS,
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    UNSUMMARIZED,
    lower,
    run_record,
    runs_query,
)
from .sqlite_format2 import (
    FORMAT2_COLUMNS,
    MAX_RIDERS,
    Names,
    Naming,
    Row,
    hash_text,
    hashed,
    insert_rows,
    names_of,
    stored_events,
    unpack,
)
from .sqlite_inbox import InboxReader, not_driving, post_write, take_write
from .writer import Settled, Writer

if TYPE_CHECKING:  # futures and asyncio load with the first write or await, not to list a log
    import concurrent.futures

__all__ = ["CLAIMABLE", "DURABILITY", "Durability", "SQLiteEventStore"]

Durability = Literal["normal", "full"]
DURABILITY: tuple[Durability, ...] = ("normal", "full")

CLAIMABLE = ("queued", "ready", "orphaned")
"""The kinds of run `claim_next` takes: submitted, decided by a human, left by a dead driver."""
T = TypeVar("T")

NEW_LOG_FORMAT = 2
"""The format a new log is created in (`log_format=` chooses per store)."""

_PLACES = MAX_RIDERS + 1
"""The search index of a format-2 log numbers a fact by its row's id times this plus its place
in the row (0 its first fact), so that each fact of a row is found with words of its own."""

_SUMMARY_SET = (
    "steps = ?, input_tokens = ?, output_tokens = ?, cost = ?, model = ?, answer = ?, error = ?"
)


class SQLiteEventStore:
    """An event log in one SQLite file (or `":memory:"`), safe to share between threads and
    between processes.

    `create=False` opens an existing log only and refuses a database that is not one; the
    default creates the schema in a new or empty database. `read_only=True` opens the file with
    SQLite's `mode=ro` and never writes to it, also where the user may only read (inspection
    tools). `busy_timeout` is how many seconds a statement waits for another process's lock
    before it fails (default 30). `durability`: `"normal"` (WAL, synchronous NORMAL) survives a
    killed process; `"full"` also makes each append marked `durable` (one that an effect follows)
    reach the disk before it returns, so it survives power loss too. A run's writer `claim`s it
    first: the catalog records the driving process and a lease of `lease` seconds that this
    store renews while it holds the run; another live driver's run is refused.

    A write is committed at once on the caller's thread when nothing else is writing, else by
    the store's writer thread (`eventstore.writer`): a caller waits for its commit (`append`) or
    awaits it (`append_async`, which never makes an event loop wait for a lock or the disk), and
    writes from several threads or tasks that arrive together share one transaction.
    `threaded=False` commits each write on the caller's thread instead, for a store one thread
    uses alone (a replay's scratch store): no thread hop, no group commit.
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        create: bool = True,
        read_only: bool = False,
        busy_timeout: float = 30.0,
        durability: Durability = "normal",
        lease: float = 60.0,
        threaded: bool = True,
        log_format: int | None = None,
    ) -> None:
        self.path = str(path)
        if log_format not in (None, 1, 2):
            raise ValueError(f"log_format is 1 or 2 (None: {NEW_LOG_FORMAT}), not {log_format!r}")
        self._new_format = NEW_LOG_FORMAT if log_format is None else log_format
        self._format = 1  # read from the schema once it is open
        self._schema_seen = -1  # SQLite's schema_version when the format was read
        self._names = Names()
        self.threaded = threaded
        """False: every write commits on the caller's thread, not the writer's (for a store
        that one thread uses alone, such as a replay's scratch store: no thread hop)."""
        self.read_only = read_only
        self.busy_timeout = busy_timeout
        self.durability = durability
        self.lease = lease
        self._tokens = Tokens()  # the runs this store drives, and those it lost
        self._closing = threading.Event()
        self._renewer: threading.Thread | None = None
        if self.path != ":memory:" and Path(self.path).is_dir():
            raise StoreError(f"{self.path!r} is a directory; point --db at a log file inside it.")
        if (not create or read_only) and self.path != ":memory:" and not Path(self.path).exists():
            raise NotAnEventLog(
                f"No database at {self.path!r}. Check the path, or record a run into it first."
            )
        self._lock = threading.RLock()
        self._has_hashes: bool | None = None
        self._has_drivers: bool | None = None
        self._has_summaries = False
        self._has_blobs = False
        self._batch_owner: int | None = None  # the thread whose batch() is open
        self._renewing = threading.Lock()
        self._watch_lock = threading.Lock()
        self._watch_mark: int | None = None
        self._watcher: sqlite3.Connection | None = None
        self._inbox: InboxReader | None = None  # reads the pending messages (`pending`)
        self._posted = False  # whether this store posted a message (`pending` of a memory log)
        self._words_fit = False  # whether the search index was seen numbered as `_PLACES` says
        try:
            self._conn = self._connect()
        except sqlite3.DatabaseError as e:
            raise self._unusable(e) from e
        self._writer = Writer(self._conn, self._lock, f"writer of {self.path}")
        weakref.finalize(self, self._writer.close, wait=False)  # a store never closed
        if not read_only and self.path != ":memory:":
            _UNCLOSED.add(self)  # closed at exit, so that its WAL is checkpointed
        try:
            self._open_schema(create and not read_only)
            if self.path != ":memory:" and not read_only:
                # only now is the file known to be an agentsm log: a foreign one is never touched
                self._into_wal()
                self._conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException as e:
            self._conn.close()
            if isinstance(e, sqlite3.DatabaseError):
                raise self._unusable(e) from e
            raise

    def _into_wal(self) -> None:
        """Put the log in WAL mode. Many processes opening one new file at once all ask: the
        change needs the file to itself, and SQLite may refuse it at once (without waiting as
        its busy handler would) while others hold it; then it is asked again, until another
        process made the change or `busy_timeout` seconds have passed."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError:
                mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() == "wal":
                    return  # another process made the change
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _connect(self) -> sqlite3.Connection:
        def connect(target: str, uri: bool = False) -> sqlite3.Connection:
            return sqlite3.connect(
                target,
                uri=uri,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_timeout,
            )

        if not self.read_only or self.path == ":memory:":
            return connect(self.path)
        uri = f"file:{urllib.parse.quote(str(Path(self.path).resolve()))}?mode=ro"
        conn = connect(uri, uri=True)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            conn.close()
            if Path(self.path + "-wal").exists():
                raise
        # A WAL log in a directory the user may only read: SQLite cannot create the -shm index
        # there. Without a -wal file every committed fact is in the main file: read it as is.
        return connect(uri + "&immutable=1", uri=True)

    def _unusable(self, e: sqlite3.DatabaseError) -> StoreError:
        if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
            return StoreError(
                f"{self.path!r} stayed locked by another process for {self.busy_timeout:g}s "
                "(busy_timeout); try again, or raise the timeout."
            )
        if isinstance(e, sqlite3.OperationalError) and "readonly" in str(e):
            return StoreError(
                f"{self.path!r} is read-only for this user ({e}): inspection commands still work; "
                "to record into it, make the file, its -wal and -shm files and their directory "
                "writable, or work on a copy (agentsm backup)."
            )
        if isinstance(e, sqlite3.OperationalError) and "unable to open" in str(e):
            return StoreError(f"Cannot open {self.path!r} ({e}); check the path and permissions.")
        if _disk_error(e):  # the file is as it was: what failed rolled back
            return StoreError(
                f"Could not read or write {self.path!r} ({e}): its disk may be full or failing. "
                "The log keeps all it committed; make room (or check the disk), then try again."
            )
        return NotAnEventLog(
            f"{self.path!r} is not a usable SQLite database: damaged or not SQLite at all "
            f"({e}). Point to an agentsm event log or a new file, or restore it from a backup."
        )

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """The rows of one query; a damaged file is a `StoreError`, not a raw sqlite3 error."""
        with self._lock:
            try:
                if self._format == 1:
                    self._follow_format()
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.OperationalError as e:
                if "decode" not in str(e):
                    raise self._unusable(e) from e
            except sqlite3.DatabaseError as e:
                raise self._unusable(e) from e
            except UnicodeEncodeError as e:  # a value read from such a cell, given back
                raise StoreError(
                    f"{self.path!r} holds text that is not UTF-8 where agentsm writes UTF-8 "
                    f"(edited outside agentsm): what it names cannot be looked up ({e})."
                ) from None
            # a cell of text that is not UTF-8 (edited outside agentsm): read it as it is, so
            # that the chain check names the fact, not the whole file as unusable
            self._conn.text_factory = _lenient_text
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.DatabaseError as e:
                raise self._unusable(e) from e
            finally:
                self._conn.text_factory = str

    def _follow_format(self) -> bool:
        """Read the log in the format it has now, where another process converted it since
        this store read its format (`agentsm migrate` turns format 1 into 2 while readers and
        writers keep it open); True if it changed. Asked by a format-1 store before each read
        and write (a format-2 log is not converted again)."""
        seen = int(self._conn.execute("PRAGMA schema_version").fetchone()[0])
        if seen == self._schema_seen:
            return False
        self._read_format()
        return True

    def _schema(self) -> tuple[int, set[str]]:
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {
            row[0]
            for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        return version, tables

    def _check_schema(self, version: int, tables: set[str], create: bool) -> bool:
        """Whether the schema needs migrating; raises if the database is not one we may use."""
        if not tables and version == 0:
            if not create:
                raise NotAnEventLog(
                    f"{self.path!r} is empty, not an agentsm event log. Check the path "
                    "(--db / AGENTSM_DB), or record a run into it first."
                )
            return True
        if "eventstore_migrations" not in tables:
            listed = f" (it has tables {sorted(tables)})" if tables else ""
            raise NotAnEventLog(
                f"{self.path!r} is a SQLite database but not an agentsm event log{listed}; "
                "it was left untouched. Use a new file for the log."
            )
        if version > LATEST:
            raise SchemaVersionError(
                f"{self.path!r} has event-log schema version {version}, newer than the {LATEST} "
                "this version understands. Upgrade agentsm to read it."
            )
        return version < self._target(version, tables)

    def _target(self, version: int, tables: set[str]) -> int:
        """The schema a log is brought to when opened: a new one to the format asked for
        (`log_format`), one of format 1 to format 1's last (format 2 only when asked:
        `upgrade`), one of format 2 to the latest."""
        if not tables and version == 0:
            return LATEST if self._new_format == 2 else FORMAT1
        return LATEST if version > FORMAT1 else FORMAT1

    @property
    def log_format(self) -> int:
        """The log's format: 1 (a row per fact, as earlier releases write) or 2 (facts packed
        into few, narrow rows; `eventstore.sqlite_format2`), as the file has it now."""
        return self._followed_format()

    def upgrade(self) -> int:
        """Bring a format-1 log to format 2 in one transaction (back it up first: `backup`);
        returns the format. A format-2 log is left as it is."""
        if self.read_only:
            raise StoreError(f"{self.path!r} is open read-only; open it to write to upgrade it.")
        if self._format == 2:
            return 2

        def write(conn: sqlite3.Connection) -> None:
            import sqlite_utils

            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            migrate(sqlite_utils.Database(conn), version)

        with self.batch():
            write(self._conn)
        self._read_format()
        return self._format

    def _read_format(self) -> None:
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        self._schema_seen = int(self._conn.execute("PRAGMA schema_version").fetchone()[0])
        self._format = log_format(version)
        self._names = Names()
        if self._format == 2:
            self._names.load(self._conn)

    def _open_schema(self, create: bool) -> None:
        """Check the schema, and create or migrate it in one `BEGIN IMMEDIATE` transaction that
        reads the version inside it, so that processes opening one new file at once agree."""
        conn = self._conn
        version, tables = self._schema()
        if not self._check_schema(version, tables, create) or self.read_only:
            self._read_format()
            return  # a read-only reader takes an older schema as it is
        conn.execute("BEGIN IMMEDIATE")
        try:
            version, tables = self._schema()
            if self._check_schema(version, tables, create):
                import sqlite_utils  # loaded here only: most opens need no migration

                upto = self._target(version, tables)
                migrate(sqlite_utils.Database(conn), version, upto=upto)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._read_format()

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
        """Add a run to the catalog together with its first `events` (and its `summary`), in one
        transaction, so that no reader ever sees it without them; an id that exists already is
        a `ConcurrencyError` and writes nothing. With `claim`, this store drives the new run
        from the same transaction on (no worker can take a running run before it is claimed)."""
        write, naming = self._create_write(
            run_id, task, parent_id, branch_seq, info, created_at, events, status, summary
        )
        write, token = self._claiming(run_id, write, claim)
        self._transaction(write, f"create run {run_id!r}")
        self._keep(naming)
        if token is not None:
            self._hold(run_id, token)
        return self.run(run_id)

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
        """`create_run` for async code, and with `claim` the run's claim in the same
        transaction (a new run has no other driver): the writer commits it while the event
        loop goes on, sharing the transaction with the other writes that arrive meanwhile."""
        write, naming = self._create_write(
            run_id, task, None, None, None, created_at, events, status, summary
        )
        write, token = self._claiming(run_id, write, claim)
        await self._committed(write, f"create run {run_id!r}")
        self._keep(naming)
        if token is not None:
            self._hold(run_id, token)

    def _claiming(
        self, run_id: str, create: Callable[[sqlite3.Connection], None], claim: bool
    ) -> tuple[Callable[[sqlite3.Connection], None], str | None]:
        """The write of a creation, with the new run's claim in it when `claim`, and the token."""
        if not claim:
            return create, None
        me, token = Driver.current(), uuid.uuid4().hex

        def write(conn: sqlite3.Connection) -> None:
            create(conn)
            self._drive(conn, run_id, me, token, time.time())

        return write, token

    def _create_write(
        self,
        run_id: str,
        task: str,
        parent_id: str | None,
        branch_seq: int | None,
        info: dict[str, Any] | None,
        created_at: float | None,
        events: Sequence[NewEvent],
        status: str | None,
        summary: RunSummary | None,
    ) -> tuple[Callable[[sqlite3.Connection], None], Naming]:
        """The write of one `create_run`, and the names it gives codes to (kept once it
        committed)."""
        now = time.time() if created_at is None else created_at
        row = (
            run_id,
            task,
            status or "created",
            now,
            events[-1].recorded_at if events else now,
            len(events),
            parent_id,
            branch_seq,
            json.dumps(info or {}),
        )
        _refuse_no_times(events, f"create run {run_id!r}")
        naming = self._naming(events)

        def write(conn: sqlite3.Connection) -> None:
            self._as_it_is_now(naming, events)
            try:
                conn.execute(
                    f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row
                )
            except sqlite3.IntegrityError as e:
                raise ConcurrencyError(
                    f"A run with id {run_id!r} exists already; choose another id."
                ) from e
            self._insert(conn, run_id, 0, events, naming.codes(conn))
            if summary is not None:
                _write_summary(conn, run_id, summary)

        return write, naming

    def run(self, run_id: str) -> RunRecord:
        """The catalog entry of one run; `UnknownRun` names the closest ids when it is missing."""
        rows = self._rows(f"SELECT {self._run_columns()} FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise self._unknown(run_id)
        return run_record(rows[0])

    def _unknown(self, run_id: str) -> UnknownRun:
        """`UnknownRun` naming the ids that start with `run_id`, else the closest ones."""
        prefixed = self._prefixed(run_id, 3) if run_id else []
        if prefixed:
            return UnknownRun(run_id, prefixed)
        ids = [r[0] for r in self._rows("SELECT run_id FROM runs")]
        import difflib

        return UnknownRun(run_id, difflib.get_close_matches(run_id, ids, n=3))

    def _prefixed(self, prefix: str, limit: int) -> list[str]:
        """Up to `limit` ids starting with `prefix`, found through the id index (a range scan)."""
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        rows = self._rows(
            "SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? ORDER BY run_id LIMIT ?",
            (prefix, upper, limit),
        )
        return [r[0] for r in rows]

    def resolve(self, run_id_or_prefix: str) -> str:
        """The exact id, else the one id starting with it (through the index), else
        `UnknownRun` (naming close ids) or `AmbiguousRunId` (naming the candidates)."""
        text = run_id_or_prefix
        if self._rows("SELECT 1 FROM runs WHERE run_id = ?", (text,)):
            return text
        matches = self._prefixed(text, 11) if text else []
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise AmbiguousRunId(text, matches)
        raise self._unknown(text)

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
        """The runs of the catalog, oldest first (newest first with `newest_first`), filtered by
        exact `status` and `model`, a case-insensitive substring of the `task`, a last fact
        at or after the epoch time `since`, and a parent among `parents` (through the parent
        index); at most `limit` of them. Never reads the facts."""
        if parents is not None and not parents:
            return []
        if model is not None and not self._summarized():
            return []
        if task is not None:
            self._define_unicode_lower()
        sql, args = runs_query(
            self._run_columns(),
            status=status,
            model=model,
            task=task,
            since=since,
            limit=limit,
            newest_first=newest_first,
            parents=parents or (),
        )
        return [run_record(r) for r in self._rows(sql, args)]

    def _define_unicode_lower(self) -> None:
        """`unicode_lower(text)` in this connection's SQL: Python's `str.lower`, every letter
        (SQLite's `lower` and `NOCASE` know ASCII letters only), as PostgreSQL's `lower`."""
        with self._lock:
            if not getattr(self, "_unicode_lower", False):
                self._conn.create_function("unicode_lower", 1, lower, deterministic=True)
                self._unicode_lower = True

    def unsummarized(self) -> list[str]:
        """The runs with facts but no summary in the catalog (logged before it kept them), oldest
        first; the agent side folds them once (`agentsm.catalog.backfill`)."""
        if not self._summarized():
            return [r[0] for r in self._rows("SELECT run_id FROM runs ORDER BY created_at, rowid")]
        rows = self._rows(UNSUMMARIZED)
        return [r[0] for r in sorted(rows, key=lambda r: r[1])]

    def search(
        self, text: str, *, kinds: Sequence[str] | None = None, limit: int = 50
    ) -> list[tuple[str, int, str, str]]:
        """The facts whose text holds every term of `text` (`eventstore.fulltext`: words,
        phrases, `prefix*`), best match (bm25) first among the last `fulltext.CANDIDATES`
        written that match: `(run_id, seq, kind, snippet)`, the snippet the matching text with
        each match in [ ]; only facts of `kinds` when given. A writable store first indexes the
        facts appended since the last search (`index_for_search`); facts not in the index (a
        read-only store's, or a log from before the index) are read one by one and come after
        the indexed matches."""
        self._followed_format()  # a conversion by another process: read it as it is
        terms = fulltext.parse_query(text)
        if not terms or limit <= 0 or (kinds is not None and not kinds):
            return []
        indexed = "events_words" in self._tables() and self._index_fits()
        if indexed and not self.read_only:
            self.index_for_search()
        rows: list[tuple[str, int, str, str]] = []
        upto = 0
        if indexed and self._format == 2:
            upto = self._rows("SELECT upto FROM events_indexed")[0][0]
            rows = self._search2(terms, kinds, limit)
        elif indexed:
            upto = self._rows("SELECT upto FROM events_indexed")[0][0]
            of_kinds = f"AND e.kind IN ({', '.join('?' * len(kinds))})" if kinds else ""
            rows = self._rows(
                "SELECT e.run_id, e.seq, e.kind, e.payload FROM (SELECT w.rowid AS id, "
                "bm25(events_words) AS rank FROM events_words w JOIN events e "
                f"ON e.rowid = w.rowid WHERE events_words MATCH ? {of_kinds} "
                "ORDER BY w.rowid DESC LIMIT ?) AS c JOIN events e ON e.rowid = c.id "
                "ORDER BY c.rank, c.id DESC LIMIT ?",
                (fulltext.fts5_query(terms), *(kinds or ()), fulltext.CANDIDATES, limit),
            )
        if len(rows) < limit:
            rows += fulltext.scan(self._unindexed_pages(upto, kinds), terms, limit - len(rows))
        return [(r, s, k, fulltext.snippet(fulltext.fact_text(p), terms)) for r, s, k, p in rows]

    def _search2(
        self, terms: Sequence[fulltext.Term], kinds: Sequence[str] | None, limit: int
    ) -> list[tuple[str, int, str, str]]:
        """The indexed matches of a format-2 log, as format 1 ranks them: each fact is indexed
        on its own, numbered by its row and its place there (`_PLACES`); a rider's kind is read
        from the row's `more`."""
        joined = of_kinds = ""
        if kinds:
            place = f"w.rowid % {_PLACES}"
            joined = (
                f"JOIN names k ON k.code = CASE {place} WHEN 0 THEN f.kind "
                f"ELSE f.more ->> ('$[' || ({place} - 1) || '][0]') END"
            )
            of_kinds = f"AND k.name IN ({', '.join('?' * len(kinds))})"
        columns = ", ".join("f." + c for c in FORMAT2_COLUMNS.split(", "))
        found = self._rows(
            f"SELECT c.id, r.run_id, {columns} FROM (SELECT w.rowid AS id, "
            f"bm25(events_words) AS rank FROM events_words w JOIN facts f "
            f"ON f.id = w.rowid / {_PLACES} {joined} WHERE events_words MATCH ? {of_kinds} "
            f"ORDER BY w.rowid DESC LIMIT ?) AS c JOIN facts f ON f.id = c.id / {_PLACES} "
            "JOIN runs r ON r.key = f.run ORDER BY c.rank, c.id DESC LIMIT ?",
            (fulltext.fts5_query(terms), *(kinds or ()), fulltext.CANDIDATES, limit),
        )
        rows = []
        for number, run_id, *row in found:
            facts = self._numbered(number // _PLACES, row)
            if number % _PLACES < len(facts):
                fact = facts[number % _PLACES][1]
                rows.append((run_id, fact[0], fact[1], fact[3]))
        return rows

    def _numbered(self, id_: int, columns: Sequence[Any]) -> list[tuple[int, Row]]:
        """The facts of the format-2 row `id_` (its `FORMAT2_COLUMNS`), each with its number in
        the search index: the row's id times `_PLACES` plus the fact's place in the row."""
        facts = unpack([columns], self._name, self._names.texts)
        return [(id_ * _PLACES + place, fact) for place, fact in enumerate(facts[:_PLACES])]

    def _index_fits(self) -> bool:
        """Whether the search index is numbered as this release numbers it. A format-2 log
        indexed by a development build of 0.4 numbered its rows, not its facts (none at or above
        `_PLACES`): a store that may write empties it, to index every fact again; a read-only
        one does not use it (it reads the facts one by one)."""
        if self._format != 2 or self._words_fit:
            return True
        first = "SELECT rowid FROM events_words ORDER BY rowid LIMIT 1"
        found = self._rows(first)
        if found and found[0][0] < _PLACES:
            if self.read_only:
                return False

            def write(conn: sqlite3.Connection) -> None:
                again = conn.execute(first).fetchone()  # unless another store did it meanwhile
                if again is not None and again[0] < _PLACES:
                    conn.execute("INSERT INTO events_words (events_words) VALUES ('delete-all')")
                    conn.execute("UPDATE events_indexed SET upto = 0")

            self._transaction(write, "index every fact again for search")
        self._words_fit = True
        return True

    def _unindexed_pages(
        self, upto: int, kinds: Sequence[str] | None, size: int = 2000
    ) -> Iterator[list[tuple[str, int, str, str]]]:
        """The facts after event rowid `upto` (of `kinds`), a page at a time (in a format-2 log,
        every fact of the rows after row id `upto`)."""
        if self._format == 2:
            yield from self._unindexed_pages2(upto, kinds, size)
            return
        where = f" AND kind IN ({', '.join('?' * len(kinds))})" if kinds is not None else ""
        sql = (
            "SELECT rowid, run_id, seq, kind, payload FROM events WHERE rowid > ?"
            f"{where} ORDER BY rowid LIMIT ?"
        )
        while True:
            page = self._rows(sql, (upto, *(kinds or ()), size))
            if not page:
                return
            upto = page[-1][0]
            yield [(r[1], r[2], r[3], r[4]) for r in page]

    def _unindexed_pages2(
        self, upto: int, kinds: Sequence[str] | None, size: int
    ) -> Iterator[list[tuple[str, int, str, str]]]:
        """`_unindexed_pages` of a format-2 log: a row whose first fact is of another kind may
        carry facts of `kinds`."""
        joined = where = ""
        if kinds is not None:
            joined = "JOIN names k ON k.code = f.kind "
            where = f" AND (k.name IN ({', '.join('?' * len(kinds))}) OR f.more IS NOT NULL)"
        columns = ", ".join("f." + c for c in FORMAT2_COLUMNS.split(", "))
        sql = (
            f"SELECT f.id, r.run_id, {columns} FROM facts f JOIN runs r ON r.key = f.run "
            f"{joined}WHERE f.id > ?{where} ORDER BY f.id LIMIT ?"
        )
        wanted = None if kinds is None else set(kinds)
        while True:
            page = self._rows(sql, (upto, *(kinds or ()), size))
            if not page:
                return
            upto = page[-1][0]
            yield [
                (run_id, fact[0], fact[1], fact[3])
                for id_, run_id, *row in page
                for _, fact in self._numbered(id_, row)
                if wanted is None or fact[1] in wanted
            ]

    def index_for_search(self, *, batch: int = 5000) -> int:
        """Add the facts appended since the last call to the full-text index (their words,
        `eventstore.fulltext`); returns how many were added. Words are made outside the write
        transaction, `batch` facts (format 2: rows) at a time, each batch committed unless
        another process indexed it meanwhile. The append path never pays for the index. A
        read-only store, or a log from before the index (not migrated), indexes nothing."""
        if self.read_only or "events_words" not in self._tables() or not self._index_fits():
            return 0
        added = 0
        while (indexed := self._index_next(batch)) is not None:
            added += indexed
        return added

    def _index_next(self, batch: int) -> int | None:
        """Index the next `batch` facts (format 2: rows of facts) not indexed: how many facts
        (0 when another store did it first), None when every fact is."""
        upto = self._rows("SELECT upto FROM events_indexed")[0][0]
        if self._format == 2:
            page = self._rows(
                f"SELECT id, {FORMAT2_COLUMNS} FROM facts WHERE id > ? ORDER BY id LIMIT ?",
                (upto, batch),
            )
            texts = [(n, fact[3]) for id_, *row in page for n, fact in self._numbered(id_, row)]
        else:
            page = self._rows(
                "SELECT rowid, payload FROM events WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (upto, batch),
            )
            texts = [(rowid, payload) for rowid, payload in page]
        if not page:
            return None
        last = page[-1][0]
        rows = [(n, " ".join(fulltext.words(fulltext.fact_text(p)))) for n, p in texts]

        def write(conn: sqlite3.Connection) -> int:
            if conn.execute("SELECT upto FROM events_indexed").fetchone()[0] != upto:
                return 0  # another store indexed them meanwhile
            conn.executemany(
                "INSERT INTO events_words (rowid, words) VALUES (?, ?)",
                [row for row in rows if row[1]],
            )
            conn.execute("UPDATE events_indexed SET upto = ?", (last,))
            return len(rows)

        return self._transaction(write, "bring the search index up to date")

    def unindexed(self) -> int:
        """How many facts the full-text index does not hold yet (appended since the last
        search by a store that could write, or logged before the index)."""
        self._followed_format()  # a conversion by another process: read it as it is
        counted = "COUNT(*) FROM events"
        if self._format == 2:  # a row holds its facts `seq` to `last`
            counted = "COALESCE(SUM(last - seq + 1), 0) FROM facts"
        if "events_words" not in self._tables() or not self._index_fits():
            return int(self._rows(f"SELECT {counted}")[0][0])
        upto = self._rows("SELECT upto FROM events_indexed")[0][0]
        return int(self._rows(f"SELECT {counted} WHERE rowid > ?", (upto,))[0][0])

    def events_of(self, kinds: Sequence[str], *, since: float | None = None) -> list[StoredEvent]:
        """Every event of these kinds, of any run, recorded at or after `since` (one pass over
        the log, for counts across runs such as `agentsm stats`)."""
        self._followed_format()  # a conversion by another process: read it as it is
        if self._format == 2:
            return self._events_of2(kinds, since)
        hashes = "hash" if self._hashed() else "NULL"
        sql = (
            f"SELECT run_id, seq, kind, payload, meta, recorded_at, version, {hashes} FROM events "
            f"WHERE kind IN ({', '.join('?' * len(kinds))})"
        )
        args: tuple[Any, ...] = tuple(kinds)
        if since is not None:
            sql += " AND recorded_at >= ?"
            args += (since,)
        return [
            StoredEvent(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7])
            for r in self._rows(sql, args)
        ]

    def _events_of2(self, kinds: Sequence[str], since: float | None) -> list[StoredEvent]:
        """`events_of` in a format-2 log (a hash its row does not keep is None here)."""
        if any(k not in self._names.codes for k in kinds):  # named since this store read them?
            with self._lock:
                self._names.load(self._conn)
        codes = [self._names.codes[k] for k in kinds if k in self._names.codes]
        if not codes:
            return []
        sql = (
            f"SELECT r.run_id, {', '.join('f.' + c for c in FORMAT2_COLUMNS.split(', '))} "
            f"FROM facts f JOIN runs r ON r.key = f.run WHERE (f.kind IN "
            f"({', '.join('?' * len(codes))}) OR f.more IS NOT NULL)"
        )
        args: tuple[Any, ...] = tuple(codes)
        if since is not None:  # a row's later facts may be recorded after its first
            sql += " AND (f.at >= ? OR f.more IS NOT NULL)"
            args += (since,)
        wanted = set(kinds)
        found: list[StoredEvent] = []
        for row in self._rows(sql + " ORDER BY f.id", args):
            facts = [f for f in unpack([row[1:]], self._name, self._names.texts) if f[1] in wanted]
            if since is not None:
                facts = [f for f in facts if f[5] >= since]
            found += stored_events(row[0], [f[:6] + (f[6] or None,) for f in facts])
        return found

    def _tables(self) -> set[str]:
        return {r[0] for r in self._rows("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def set_summary(self, run_id: str, summary: RunSummary) -> None:
        """Write a run's summary in the catalog (a back-fill: a recorder writes it with the
        facts, through `create_run` and `append`)."""

        def write(conn: sqlite3.Connection) -> None:
            if _write_summary(conn, run_id, summary) == 0:
                raise self._unknown(run_id)

        self._transaction(write, f"write the summary of run {run_id!r}")

    def set_status(self, run_id: str, status: str) -> None:
        """Change a run's status in the catalog (the catalog is not the log: it may change).
        From the run's driver, the change carries its lease token, as its appends do."""
        token = self._tokens.for_write(run_id)

        def write(conn: sqlite3.Connection) -> None:
            sql = "UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?"
            args: tuple[Any, ...] = (status, time.time(), run_id)
            if token is not None:
                sql, args = sql + " AND driver_token = ?", (*args, token)
            if conn.execute(sql, args).rowcount == 0:
                self._refused(conn, run_id, token)

        self._transaction(write, f"set the status of run {run_id!r}")

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
        """Append `events` after `expected_seq` in one transaction (with the run's `status` and
        `summary` when given); returns the new last seq. `durable`: an effect follows, so with
        `durability="full"` the commit is synced to disk."""
        write, naming = self._append_write(run_id, expected_seq, events, status, summary)
        last = int(self._transaction(write, f"append to run {run_id!r}", durable=durable))
        self._keep(naming)
        self._handed_back(run_id, status)
        return last

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
        """`append` for async code: awaits the writer's commit without blocking the loop, so
        that the commits of concurrent runs share transactions."""
        import asyncio

        write, naming = self._append_write(run_id, expected_seq, events, status, summary)
        try:
            last = int(await self._committed(write, f"append to run {run_id!r}", durable))
        except asyncio.CancelledError:  # raised only once the append is known to be done
            self._handed_back(run_id, status)
            raise
        self._keep(naming)
        self._handed_back(run_id, status)
        return last

    async def _committed(
        self, write: Callable[[sqlite3.Connection], T], what: str, durable: bool = False
    ) -> T:
        """`_transaction` for async code: the writer's commit awaited without blocking the
        loop. If the awaiting task is cancelled, the write is still carried out whole or not
        at all, and the cancellation is raised once it is known which."""
        if self._batch_owner == threading.get_ident():
            return self._transaction(write, what, durable=durable)
        future = self._submit(write, what, durable, at_once=not _loop_busy())
        if isinstance(future, Settled) or future.done():  # committed on this thread
            return future.result()
        from .wakeups import committed

        return await committed(future)

    def _handed_back(self, run_id: str, status: str | None) -> None:
        """After a committed append: a status that hands the run back released it in the same
        transaction, so this store no longer drives it."""
        if hands_back(status) and self._batch_owner != threading.get_ident():
            self._tokens.hand_back(run_id)

    def _refused(self, conn: sqlite3.Connection, run_id: str, token: str | None) -> None:
        """Say why a write of this store's to the run moved nothing: the run is unknown, or
        another driver has it (then the run is fenced: `LeaseLost`)."""
        row = conn.execute(
            "SELECT driver_token, driver_host, driver_pid FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise self._unknown(run_id)
        if token is not None and row[0] != token:
            holder = str(Driver(row[1], row[2])) if row[0] else "no process"
            raise self._tokens.lose(run_id, lost_lease(run_id, holder))

    def _append_write(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[NewEvent],
        status: str | None,
        summary: RunSummary | None,
    ) -> tuple[Callable[[sqlite3.Connection], int], Naming]:
        """The write of one append (see `append`), returning the new last seq, and the names it
        gives codes to (kept once it committed)."""
        last = expected_seq + len(events)
        in_batch = self._batch_owner == threading.get_ident()
        token = self._tokens.for_write(run_id)  # a lost run: refused here, before the database
        _refuse_no_times(events, f"append to run {run_id!r}")
        naming = self._naming(events)

        def write(conn: sqlite3.Connection) -> int:
            self._as_it_is_now(naming, events)
            now = events[-1].recorded_at if events else time.time()
            sql = "UPDATE runs SET last_seq = ?, updated_at = ?"
            params: tuple[Any, ...] = (last, now)
            if status is not None:
                sql += ", status = ?"
                params += (status,)
                if hands_back(status) and not in_batch:  # released in the same statement
                    sql += ", " + RELEASED
            if summary is not None:
                sql += ", " + _SUMMARY_SET
                params += _summary_row(summary)
            moved = conn.execute(
                sql
                + " WHERE run_id = ? AND last_seq = ? AND driver_token IS ? RETURNING "
                + ("key" if self._format == 2 else "NULL"),
                (*params, run_id, expected_seq, token),
            ).fetchone()
            if moved is None:
                row = conn.execute(
                    "SELECT last_seq, driver_token, driver_host, driver_pid FROM runs "
                    "WHERE run_id = ?",
                    (run_id,),
                ).fetchone()
                if row is None:
                    raise self._unknown(run_id)
                if row[1] != token:
                    if token is None:  # this store never drove it: someone else does
                        raise ConcurrencyError(
                            f"Run {run_id!r} is driven by {Driver(row[2], row[3])}; this store "
                            "has not claimed it. Nothing was written."
                        )
                    self._refused(conn, run_id, token)
                raise ConcurrencyError(
                    f"Run {run_id!r} is at seq {row[0]}, not {expected_seq}: another "
                    "writer appended first. Nothing was written; reload the run."
                )
            try:
                self._insert(conn, run_id, expected_seq, events, naming.codes(conn), moved[0])
            except sqlite3.IntegrityError as e:
                raise ConcurrencyError(
                    f"Another writer appended to run {run_id!r} at seq {expected_seq + 1} "
                    "first. Nothing was written; reload the run."
                ) from e
            return last

        return write, naming

    def _keep(self, naming: Naming) -> None:
        """Keep the codes a committed write gave (not inside a `batch`, which may still roll
        back: the next write looks them up again)."""
        if naming.added and self._batch_owner != threading.get_ident():
            self._names.keep(naming.added)

    def _followed_format(self) -> int:
        """The log's format, followed first where another process may have converted it (see
        `_follow_format`): asked before a read that chooses its SQL by the format."""
        if self._format == 1:
            with self._lock:
                self._follow_format()
        return self._format

    def _as_it_is_now(self, naming: Naming, events: Sequence[NewEvent]) -> None:
        """In a write's transaction (the log cannot change under it): follow a conversion made
        since the write was made, and give the write the codes the log's format now needs, so
        that it is written as the log is now (made on the caller's thread without waiting for
        the store's lock, it may have been made for format 1)."""
        if self._format == 1:
            self._follow_format()
        if self._format == 2 and naming.names is not self._names:
            naming.names = self._names
            naming.missing = self._names.missing(names_of(events))

    def _naming(self, events: Sequence[NewEvent]) -> Naming:
        """The codes `events` need in a format-2 log (none in a format-1 one)."""
        if self._format != 2 or not events:
            return Naming(self._names, [])
        return Naming(self._names, self._names.missing(names_of(events)))

    def _insert(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        after: int,
        events: Sequence[NewEvent],
        codes: dict[str, int],
        key: int | None = None,
    ) -> None:
        """Insert events after seq `after` in the log's format, their hashes chained (`key`:
        the run's, in a format-2 log, if the caller read it)."""
        if self._format == 2:
            if key is None:
                key = conn.execute("SELECT key FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
            insert_rows(conn, run_id, key, after, events, codes)
        else:
            _insert(conn, run_id, after, events)
        blobs = [(b.digest, b.media_type, b.data, b.size) for e in events for b in e.blobs]
        if blobs:  # stored once: a blob the log holds already is left as it is
            conn.executemany(
                "INSERT OR IGNORE INTO blobs (digest, media_type, bytes, size) VALUES (?, ?, ?, ?)",
                blobs,
            )

    # -- the inbox: messages to a run from outside ---------------------------------------------

    def post(self, run_id: str, kind: str, payload: str) -> int:
        """Queue a message for the run (see `Inbox`); returns its number, the run's next."""
        write = post_write(run_id, kind, payload, self._unknown)
        self._posted = True  # before the write: a reader may look while it commits
        return int(self._transaction(write, f"post a message to run {run_id!r}"))

    def pending(self, run_id: str) -> list[InboxMessage]:
        """The run's messages not taken yet, oldest first (read without waiting for writes).
        A log in memory that was never posted to has none (only this store reaches it)."""
        if not self._posted and self.path == ":memory:":
            return []
        if self._inbox is None:
            own = self.path != ":memory:"
            self._inbox = InboxReader(
                self._connect if own else None, (self._conn, self._lock), self._unusable
            )
        return self._inbox.pending(run_id)

    def take(self, run_id: str, upto: int) -> None:
        """Mark the run's messages up to `upto` taken: from its driver only (see `Inbox`)."""
        token = self._tokens.for_write(run_id)  # a lost run: refused here, before the database
        if token is None:
            raise not_driving(run_id)
        self._transaction(
            take_write(run_id, upto, token, self._refused), f"take the messages of run {run_id!r}"
        )

    # -- who drives a run -------------------------------------------------------------------

    def claim(self, run_id: str, *, force: bool = False) -> None:
        """Record this process as the run's driver, with a lease this store renews, so that
        its appends are accepted and a late one from a superseded driver is not. A run driven
        by another live process (same host: its pid runs with the same start time; other
        host: its lease has not expired) is refused with `RunInUse`, unless `force`."""
        write, token = self._claim_write(run_id, force)
        self._transaction(write, f"claim run {run_id!r}")
        self._hold(run_id, token)

    async def claim_async(self, run_id: str, *, force: bool = False) -> None:
        """`claim` for async code: the writer commits it while the event loop goes on."""
        write, token = self._claim_write(run_id, force)
        await self._committed(write, f"claim run {run_id!r}")
        self._hold(run_id, token)

    def _claim_write(
        self, run_id: str, force: bool
    ) -> tuple[Callable[[sqlite3.Connection], None], str]:
        """The write of one `claim`, and the token it names this process's claim by."""
        me = Driver.current()
        token = uuid.uuid4().hex

        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT driver_token, driver_host, driver_pid, driver_started, lease_until "
                "FROM runs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise self._unknown(run_id)
            now = time.time()
            refuse_live_driver(run_id, row, self._tokens.get(run_id), force=force, now=now)
            self._drive(conn, run_id, me, token, now)

        return write, token

    def claim_next(
        self, *, kinds: Sequence[str] = ("queued", "ready", "orphaned")
    ) -> RunRecord | None:
        """Claim the next run that can go on (orphaned runs first, then ready, then queued; the
        oldest `updated_at` first within each), in one `BEGIN IMMEDIATE` transaction (so two
        workers never take the same one), and return its record; None when no run can go on.
        See `EventStore.claim_next` for the kinds."""
        unknown = [k for k in kinds if k not in CLAIMABLE]
        if unknown:
            raise StoreError(
                f"claim_next(kinds=...) got {', '.join(map(repr, unknown))}; the kinds are "
                f"{', '.join(map(repr, CLAIMABLE))}."
            )
        waiting = [k for k in kinds if k != "orphaned"]
        where: list[str] = []
        if waiting:
            marks = ", ".join("?" * len(waiting))
            where.append(f"(status IN ({marks}) AND (lease_until IS NULL OR lease_until < ?))")
        if "orphaned" in kinds:
            where.append("(status = 'running' AND (driver_token IS NULL OR lease_until < ?))")
        if not where:
            return None
        sql = (
            "SELECT run_id, driver_host, driver_pid, driver_started, lease_until FROM runs "
            f"WHERE {' OR '.join(where)} ORDER BY {CLAIM_ORDER} LIMIT 1"
        )

        def candidates(now: float) -> tuple[Any, ...]:
            """The query's parameters at time `now`, in the order of its clauses."""
            args: list[Any] = [*waiting, now] if waiting else []
            return (*args, now) if "orphaned" in kinds else tuple(args)

        if not self._rows(sql, candidates(time.time())):  # a look without the write lock first:
            return None  # idle workers polling do not hold writers up
        me = Driver.current()
        token = uuid.uuid4().hex
        found: list[tuple[Any, ...]] = []

        def write(conn: sqlite3.Connection) -> None:
            now = time.time()
            row = conn.execute(sql, candidates(now)).fetchone()
            if row is not None:
                self._drive(conn, row[0], me, token, now)
                found.append(row)

        self._transaction(write, "claim the next run that can go on")
        if not found:
            return None
        run_id, host, pid, started, until = found[0]
        self._hold(run_id, token)
        previous = (Driver(host, pid, started or ""), until) if host else None
        return dataclasses.replace(self.run(run_id), previous=previous)

    def _drive(
        self, conn: sqlite3.Connection, run_id: str, me: Driver, token: str, now: float
    ) -> None:
        """Name this process as the run's driver, with a fresh lease (inside a transaction)."""
        conn.execute(
            "UPDATE runs SET driver_host = ?, driver_pid = ?, driver_started = ?, "
            "driver_token = ?, lease_until = ? WHERE run_id = ?",
            (me.host, me.pid, me.started, token, now + self.lease, run_id),
        )

    def _hold(self, run_id: str, token: str) -> None:
        """Remember the claim and keep its lease renewed while this store is open."""
        self._tokens.hold(run_id, token)
        with self._renewing:
            if self._renewer is None and self.path != ":memory:":
                self._renewer = threading.Thread(
                    target=_renew_leases,
                    args=(weakref.ref(self), self._closing, self.lease / 3),
                    name=f"lease renewer of {self.path}",
                    daemon=True,
                )
                self._renewer.start()

    def wait_for_append(self, timeout: float) -> bool:
        """Sleep until another connection commits to the file (`PRAGMA data_version`, polled
        with back-off from 5 ms to 200 ms on a connection of its own, so this store's own
        commits count too) or `timeout` seconds pass. True when something was committed since
        the previous call returned (or since the first call began): a catalog change such as a
        lease renewal wakes it too, which only costs a read."""
        deadline = time.monotonic() + max(0.0, timeout)
        delay = 0.005
        with self._watch_lock:
            if self._watch_mark is None:
                self._watch_mark = self._change_mark()
            while True:
                mark = self._change_mark()
                if mark != self._watch_mark:
                    self._watch_mark = mark
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self._closing.is_set():
                    return False
                time.sleep(min(delay, left))
                delay = min(delay * 2, 0.2)

    def _change_mark(self) -> int:
        """A number that changes whenever a commit reaches the database."""
        if self.path == ":memory:":  # one connection sees every change: count its own
            with self._lock:
                return self._conn.total_changes
        if self._watcher is None:
            self._watcher = self._connect()
        try:
            return int(self._watcher.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.DatabaseError as e:
            raise self._unusable(e) from e

    def release(self, run_id: str) -> None:
        """Stop driving the run: the catalog no longer names this process (if it still did). A
        run released while still "running" is interrupted: a worker may take it at once."""
        token = self._tokens.hand_back(run_id)
        if token is not None:
            self._transaction(self._release_write(run_id, token), f"release run {run_id!r}")

    async def release_async(self, run_id: str) -> None:
        """`release` for async code; nothing to wait for when the run is not held (an append
        that handed it back released it already)."""
        token = self._tokens.hand_back(run_id)
        if token is not None:
            await self._committed(self._release_write(run_id, token), f"release run {run_id!r}")

    @staticmethod
    def _release_write(run_id: str, token: str) -> Callable[[sqlite3.Connection], Any]:
        def write(conn: sqlite3.Connection) -> Any:
            return conn.execute(
                f"UPDATE runs SET {RELEASED} WHERE run_id = ? AND driver_token = ?",
                (run_id, token),
            )

        return write

    def _renew(self) -> None:
        """Extend the leases of the runs this store drives."""
        for run_id, token in self._tokens.held():

            def write(conn: sqlite3.Connection, run_id: str = run_id, token: str = token) -> None:
                renewed = conn.execute(
                    "UPDATE runs SET lease_until = ? WHERE run_id = ? AND driver_token = ?",
                    (time.time() + self.lease, run_id, token),
                ).rowcount
                if not renewed and self._tokens.get(run_id) == token:  # still ours, we thought
                    self._refused(conn, run_id, token)

            try:
                self._transaction(write, f"renew the lease of run {run_id!r}")
            except StoreError:
                pass  # a lost run is fenced now; a failure is tried again at the next round

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

    def _transaction(
        self, write: Callable[[sqlite3.Connection], T], what: str, *, durable: bool = False
    ) -> T:
        """Run `write` in one `BEGIN IMMEDIATE` transaction (the writer's, maybe shared with
        other writes, each in a savepoint of its own) and return what it returned: all of it is
        committed or, on any failure (the COMMIT's own included), none of it, and the store
        stays usable. A durable commit under `durability="full"` syncs the WAL (synchronous
        FULL) before returning. Inside this thread's `batch()`, `write` joins the batch."""
        if self._batch_owner == threading.get_ident():
            return write(self._conn)  # part of batch()'s transaction, which commits or rolls back
        result: T = self._submit(write, what, durable).result()
        return result

    def _submit(
        self,
        write: Callable[[sqlite3.Connection], T],
        what: str,
        durable: bool,
        *,
        at_once: bool = True,
    ) -> concurrent.futures.Future[T] | Settled:
        """Commit `write`: at once on this thread where it would wait for nothing (and
        `at_once`: an event loop with many callbacks ready leaves its commits to the writer,
        which groups them and wakes their waiters a few per turn), else by the writer."""
        if self._closing.is_set():
            raise StoreError(f"Could not {what}: the store {self.path!r} is closed.")
        sync = durable and self._durability == "full" and self.path != ":memory:"
        if not self.threaded:
            return self._writer.commit_now(write, what, sync=sync)
        if at_once and not sync:  # a commit that does not wait for the disk: no thread hop
            busy = None if self.path == ":memory:" else self.busy_timeout
            done = self._writer.try_now(write, what, busy_timeout=busy)
            if done is not None:
                return done
        return self._writer.submit(write, what, sync=sync)

    @property
    def transactions(self) -> int:
        """How many write transactions this store's writer has run (its group commits)."""
        return self._writer.transactions

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make every write of this thread inside the block one `BEGIN IMMEDIATE` transaction:
        all of it is committed at the end, or none of it if anything raises (an import of
        several runs). Other threads' writes wait for its end."""
        if self._batch_owner == threading.get_ident():
            yield
            return
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                self._batch_owner = threading.get_ident()
                try:
                    yield
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                finally:
                    self._batch_owner = None
            except sqlite3.Error as e:
                raise StoreError(f"Could not write the batch; nothing was written ({e}).") from e

    def read(self, run_id: str, *, after: int = 0, upto: int | None = None) -> list[StoredEvent]:
        """The run's events with `after < seq <= upto`, in order."""
        self._followed_format()  # a conversion by another process: read it as it is
        if self._format == 2:
            return self._read2(run_id, after, upto)
        hashes = "hash" if self._hashed() else "NULL"
        sql = (
            f"SELECT run_id, seq, kind, payload, meta, recorded_at, version, {hashes} "
            "FROM events WHERE run_id = ? AND seq > ?"
        )
        args: tuple[Any, ...] = (run_id, after)
        if upto is not None:
            sql += " AND seq <= ?"
            args += (upto,)
        rows = self._rows(sql + " ORDER BY seq", args)
        if not rows and after == 0:
            self.run(run_id)
        return [
            StoredEvent(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7]) for r in rows
        ]

    def read_payloads(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> list[tuple[int, str, int, str, str, float]]:
        """The run's events with `after < seq <= upto`, in order, as (seq, kind, version,
        payload, meta text, recorded_at) rows, nothing parsed (see `PayloadReader`)."""
        return self._bare(run_id, after, upto, "")

    def read_chained(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> list[tuple[int, str, int, str, str, float, str | None]]:
        """`read_payloads` with each event's hash last (None in a log from before hashes), for
        a reader that checks the chain (`eventstore.reading.ChainedReader`)."""
        return self._bare(run_id, after, upto, ", hash" if self._hashed() else ", NULL")

    def _bare(self, run_id: str, after: int, upto: int | None, more: str) -> list[Any]:
        self._followed_format()  # a conversion by another process: read it as it is
        if self._format == 2:
            rows = self._facts(run_id, after, upto)[0]
            if more:  # a chained read takes whole rows: a row's last hash covers the others
                return [r for r in rows if r[0] > after]
            return [r[:6] for r in rows if r[0] > after and (upto is None or r[0] <= upto)]
        sql = (
            f"SELECT seq, kind, version, payload, meta, recorded_at{more} FROM events "
            "WHERE run_id = ? AND seq > ?"
        )
        args: tuple[Any, ...] = (run_id, after)
        if upto is not None:
            sql += " AND seq <= ?"
            args += (upto,)
        rows = self._rows(sql + " ORDER BY seq", args)
        if not rows and after == 0:
            self.run(run_id)
        return rows

    def _key(self, run_id: str) -> int | None:
        """The run's key in a format-2 log (None: no such run)."""
        rows = self._rows("SELECT key FROM runs WHERE run_id = ?", (run_id,))
        return int(rows[0][0]) if rows else None

    def _name(self, code: int) -> str:
        """The kind or state a code of a format-2 log stands for; `?code` for a code the log no
        longer names (removed from `names`): no fact has that name, so its hash breaks there."""
        found = self._names.names.get(code)
        if found is None:
            with self._lock:
                self._names.load(self._conn)
            found = self._names.names.get(code)
        return f"?{code}" if found is None else found

    def _facts(
        self, run_id: str, after: int, upto: int | None, *, from_kept: bool = False
    ) -> tuple[list[Row], str]:
        """The facts of the rows of a format-2 log that hold seqs `after < seq <= upto`, whole
        rows, on to the next row that keeps its hash (so that a check reaches one), and the
        hash of the fact before the first. `from_kept`: begin after the last row before
        `after + 1` that keeps its hash, that hash the one before (a reader that computes every
        hash); else at the row that holds `after + 1`, and the hash before is not known ("")."""
        key = self._key(run_id)
        if key is None:
            raise self._unknown(run_id)
        start = (
            "seq >= COALESCE((SELECT seq FROM facts WHERE run = ? AND seq <= ? "
            "ORDER BY seq DESC LIMIT 1), 0)"
        )
        args: tuple[Any, ...] = (key, key, after + 1)
        before = ""
        if from_kept and after > 0:
            kept = self._rows(
                "SELECT last, hash FROM facts WHERE run = ? AND last <= ? AND hash IS NOT NULL "
                "AND seq <= ? ORDER BY seq DESC LIMIT 1",
                (key, after, after),
            )
            if kept:
                args = (key, kept[0][0])
                start = "seq > ?"
                before = hash_text(kept[0][1]) or GENESIS
            else:
                args = (key, 0)
                start = "seq > ?"
        elif from_kept:
            before = GENESIS
        sql = f"SELECT {FORMAT2_COLUMNS} FROM facts WHERE run = ? AND {start}"
        if upto is not None:
            sql += (
                " AND seq <= COALESCE((SELECT seq FROM facts WHERE run = ? AND hash IS NOT NULL "
                "AND seq >= COALESCE((SELECT seq FROM facts WHERE run = ? AND seq <= ? "
                "ORDER BY seq DESC LIMIT 1), 0) ORDER BY seq LIMIT 1), ?)"
            )
            args += (key, key, upto, upto)
        return unpack(
            self._rows(sql + " ORDER BY seq", args), self._name, self._names.texts
        ), before

    def _read2(self, run_id: str, after: int, upto: int | None) -> list[StoredEvent]:
        """`read` of a format-2 log: every event with its hash (those a row does not keep
        computed from the ones before)."""
        rows, previous = self._facts(run_id, after, upto, from_kept=True)
        wanted = [
            r
            for r in hashed(rows, run_id, previous)
            if r[0] > after and (upto is None or r[0] <= upto)
        ]
        return stored_events(run_id, wanted)

    def _run_columns(self) -> str:
        """The catalog columns a `RunRecord` reads, with its driver and summary where the log
        has them (a read-only open may meet a log from before them)."""
        if self._has_drivers is None:
            columns = {r[1] for r in self._rows("PRAGMA table_info(runs)")}
            self._has_drivers = "driver_pid" in columns
            self._has_summaries = "steps" in columns
        return (
            RUN_COLUMNS
            + (DRIVER_COLUMNS if self._has_drivers else NO_DRIVER_COLUMNS)
            + (SUMMARY_COLUMNS if self._has_summaries else "")
        )

    def _summarized(self) -> bool:
        """Whether the catalog has the summary columns (a read-only open may meet an old log)."""
        self._run_columns()
        return self._has_summaries

    def _blobbed(self) -> bool:
        """Whether the log has the blob table (a read-only open may meet a log from before it,
        which holds no blobs)."""
        if not self._has_blobs:
            self._has_blobs = "blobs" in self._tables()
        return self._has_blobs

    def _hashed(self) -> bool:
        """Whether events have hashes (a read-only open may meet a log from before them)."""
        if self._has_hashes is None:
            columns = {r[1] for r in self._rows("PRAGMA table_info(events)")}
            self._has_hashes = "hash" in columns
        return self._has_hashes

    def verify(self, run_id: str) -> ChainReport:
        """Check the hash chain of a run: the first broken link, if any (see `eventstore.chain`),
        else the first fact that refers to a blob missing or changed (`eventstore.blobs`)."""
        record = self.run(run_id)
        if self._format == 2:  # with the hashes its rows keep, `COVERED` where they keep none
            events = stored_events(run_id, self._facts(run_id, 0, None)[0])
        else:
            events = self.read(run_id)
        upto = len(events)
        if self._hashed():
            rows = self._rows("SELECT upto FROM events_unhashed WHERE run_id = ?", (run_id,))
            upto = rows[0][0] if rows else 0
        report = check_chain(run_id, events, unhashed_upto=upto, last_seq=record.last_seq)
        if report.ok and (digests := blob_refs_of(events)):
            broken = blob_break(events, self.blobs(digests))
            if broken is not None:
                return dataclasses.replace(report, broken=broken)
        return report

    def blobs(self, digests: Sequence[str]) -> dict[str, Blob]:
        """The blobs of these digests the log holds, by digest (see `eventstore.blobs`)."""
        wanted = list(dict.fromkeys(digests))
        if not wanted or not self._blobbed():
            return {}
        found: dict[str, Blob] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self._rows(
                "SELECT digest, media_type, bytes FROM blobs "
                f"WHERE digest IN ({', '.join('?' * len(chunk))})",
                tuple(chunk),
            )
            found.update((r[0], Blob(r[0], r[1], bytes(r[2]))) for r in rows)
        return found

    def compact(self) -> None:
        """Give the file back the space of what was dropped (`VACUUM`; after `upgrade`)."""
        with self._lock:
            try:
                self._conn.execute("VACUUM")
            except sqlite3.DatabaseError as e:
                raise self._unusable(e) from e

    def backup(self, dest: str | Path, *, read_only: bool = False) -> None:
        """Copy the whole log, as one consistent snapshot, into the new file `dest` with SQLite's
        backup API: unlike copying the .db file, the copy holds the facts still in the -wal, and
        writers may go on meanwhile. The copy is written under a name of its own in the same
        folder (`dest.partial-PID`) and takes `dest` only once complete (`read_only`: made
        read-only first), so that a copy cut short never bears the name."""
        target = Path(dest)
        if target.exists():
            raise StoreError(f"{str(target)!r} exists already; back up into a new file.")
        partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
        partial.unlink(missing_ok=True)  # left by a killed process that had this pid
        try:
            copy = sqlite3.connect(partial)
        except sqlite3.Error as e:
            raise StoreError(f"Cannot create {str(target)!r} ({e}); check the path.") from e
        try:
            try:
                with self._lock:
                    self._conn.backup(copy)
            finally:
                copy.close()
            if read_only:
                partial.chmod(stat.S_IMODE(partial.stat().st_mode) & ~0o222)
            if target.exists():  # made meanwhile by someone else: theirs is kept
                raise StoreError(
                    f"{str(target)!r} appeared while the copy was made; back up into a new file."
                )
            os.replace(partial, target)
        except sqlite3.DatabaseError as e:
            if _disk_error(e):
                raise StoreError(
                    f"Could not back up {self.path!r} into {str(target)!r} ({e}): a disk may be "
                    "full or failing. The log is unchanged and no copy was left; make room "
                    "where the copy goes (or check the disk), then try again."
                ) from e
            raise self._unusable(e) from e
        finally:
            partial.unlink(missing_ok=True)
            Path(f"{partial}-journal").unlink(missing_ok=True)

    def close(self) -> None:
        """Close the connection (the runs it drives keep their record of this process until
        it exits); the store cannot be used afterwards. A store that wrote checkpoints the WAL
        first, so that the database file alone holds every committed fact (as far as readers
        in other processes let it: what they still read stays in the `-wal` file)."""
        self._closing.set()
        _UNCLOSED.discard(self)
        if self._renewer is not None:
            self._renewer.join()
        self._writer.close()
        with self._lock:
            if not self.read_only and self.path != ":memory:":
                try:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass  # another connection holds the file: the WAL stays, as valid as ever
            self._conn.close()
        with self._watch_lock:
            if self._watcher is not None:
                self._watcher.close()
        if self._inbox is not None:
            self._inbox.close()

    def __enter__(self) -> SQLiteEventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteEventStore({self.path!r})"


_UNCLOSED: weakref.WeakSet[SQLiteEventStore] = weakref.WeakSet()
"""The stores of files that may be written and are not closed yet."""


def _loop_busy() -> bool:
    """Whether the running event loop has more callbacks ready than `wakeups.BATCH` (many
    runs going on at once): their commits then go to the writer, grouped, so that the loop's
    turns stay short (a timer waits for one batch at most). A loop that does not say how many
    it has (not asyncio's own) is taken as not busy."""
    import asyncio

    from .wakeups import BATCH

    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    return ready is not None and len(ready) > BATCH


@atexit.register
def _close_unclosed() -> None:
    """At exit, close the stores a program left open (a script that never called `close()`):
    what they committed is then in the database file itself, not only in its `-wal`."""
    for store in list(_UNCLOSED):
        try:
            store.close()
        except Exception:  # an exit goes on whatever one store says
            pass


def _renew_leases(
    ref: weakref.ref[SQLiteEventStore], closing: threading.Event, period: float
) -> None:
    """The renewer thread: renews the store's leases every `period` seconds until the store is
    closed or gone (it holds the store weakly, so as not to keep it alive)."""
    while not closing.wait(period):
        store = ref()
        if store is None:
            return
        store._renew()
        del store


def _insert(conn: sqlite3.Connection, run_id: str, after: int, events: Sequence[NewEvent]) -> None:
    """Insert events after seq `after` in format 1, each with its hash chained to the one
    before."""
    row = conn.execute(
        "SELECT hash FROM events WHERE run_id = ? AND seq = ?", (run_id, after)
    ).fetchone()
    previous = row[0] if row is not None and row[0] else GENESIS
    rows = []
    for seq, e in enumerate(events, start=after + 1):
        previous = chained(previous, run_id, seq, e)
        rows.append((run_id, seq, e.kind, e.payload, e.meta, e.recorded_at, e.version, previous))
    conn.executemany(
        "INSERT INTO events (run_id, seq, kind, payload, meta, recorded_at, version, hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def _disk_error(e: sqlite3.Error) -> bool:
    """Whether SQLite failed for want of space or at the disk (not a damaged file)."""
    name = getattr(e, "sqlite_errorname", "")
    return name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR")


def _summary_row(summary: RunSummary) -> tuple[Any, ...]:
    def cut(text: str | None) -> str | None:
        return text[:SUMMARY_TEXT] if text is not None else None

    return (
        summary.steps,
        summary.input_tokens,
        summary.output_tokens,
        summary.cost,
        summary.model,
        cut(summary.answer),
        cut(summary.error),
    )


def _write_summary(conn: sqlite3.Connection, run_id: str, summary: RunSummary) -> int:
    cur = conn.execute(
        f"UPDATE runs SET {_SUMMARY_SET} WHERE run_id = ?", (*_summary_row(summary), run_id)
    )
    return cur.rowcount


def _refuse_no_times(events: Sequence[NewEvent], what: str) -> None:
    """Refuse a write of a fact whose recording time is not a number (NaN: a clock that
    failed), before the database sees it, saying which."""
    for n, event in enumerate(events):
        if event.recorded_at != event.recorded_at:
            raise StoreError(
                f"Could not {what}: its fact {n + 1} of {len(events)} ({event.kind}) has no "
                "recording time (NaN); the clock that timed it must give seconds as a number. "
                "Nothing was written."
            )


def _lenient_text(data: bytes) -> str:
    """Text that is not UTF-8, its bytes kept as escapes (no fact hashes to such text)."""
    return data.decode("utf-8", "surrogateescape")
