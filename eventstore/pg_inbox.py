"""The inbox of a PostgreSQL store (`Inbox`): messages posted to a run from any host, taken by
its driver only. An insert into `inbox` NOTIFYs the schema's inbox channel with the run id; a
store that asks for a run's pending messages listens there (a thread of its own), and asks the
server again only for a run something was posted to since it last found none: a driver asks at
every step, and most steps cost no round trip."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from .errors import ConcurrencyError, LeaseLost, StoreError, UnknownRun
from .fencing import Tokens
from .pg_connections import Conn, Connections
from .records import InboxMessage
from .sqlite_inbox import not_driving

__all__ = ["Bell", "PgInbox", "inbox_channel"]

log = logging.getLogger("eventstore.postgres")

_POST = (
    b"INSERT INTO inbox (run_id, n, kind, payload, posted_at) "
    b"SELECT run_id, (SELECT COALESCE(MAX(n), 0) + 1 FROM inbox WHERE run_id = %s), "
    b"%s, %s, %s FROM runs WHERE run_id = %s RETURNING n"
)
_PENDING = (
    "SELECT n, kind, payload, posted_at FROM inbox WHERE run_id = %s AND NOT taken ORDER BY n"
)


def inbox_channel(schema: str) -> str:
    """The channel the inserts into `schema`'s inbox NOTIFY, with the run id as payload."""
    return f"agentsm_inbox_{hashlib.md5(schema.encode()).hexdigest()[:16]}"


class Bell:
    """Which runs had something posted since a given moment, from the NOTIFYs of the inbox
    channel, received by a thread of its own. `ticket(run)` is taken before a query; the run
    is `quiet` afterwards while no NOTIFY for it came and the listener stayed connected (a
    reconnection makes every run unsure again)."""

    def __init__(self, connect: Callable[[], Conn], channel: str) -> None:
        self._connect = connect
        self._channel = channel
        self._lock = threading.Lock()
        self._rings: dict[str, int] = {}
        self._epoch = 0  # 0: not listening
        self._quiet: dict[str, tuple[int, int]] = {}
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    def ticket(self, run_id: str) -> tuple[int, int] | None:
        """What the listener has heard of the run so far (None: it is not listening yet)."""
        self._start()
        with self._lock:
            return None if not self._epoch else (self._epoch, self._rings.get(run_id, 0))

    def quiet(self, run_id: str) -> bool:
        """Whether nothing was posted to the run since it was last found to have nothing."""
        with self._lock:
            known = self._quiet.get(run_id)
            return known is not None and known == (self._epoch, self._rings.get(run_id, 0))

    def found_none(self, run_id: str, ticket: tuple[int, int] | None) -> None:
        """A query begun at `ticket` found nothing pending for the run."""
        if ticket is not None:
            with self._lock:
                self._quiet[run_id] = ticket

    def _start(self) -> None:
        if self._thread is None and not self._closing.is_set():
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._listen, name=f"inbox listener {self._channel}", daemon=True
                    )
                    self._thread.start()

    def _listen(self) -> None:
        pause = 0.1
        while not self._closing.is_set():
            try:
                with self._connect() as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    with self._lock:
                        self._epoch = max(self._epoch, 0) + 1
                        self._quiet.clear()
                    pause = 0.1
                    while not self._closing.is_set():
                        for note in conn.notifies(timeout=0.5):
                            with self._lock:
                                self._rings[note.payload] = self._rings.get(note.payload, 0) + 1
            except (psycopg.Error, StoreError) as e:
                log.info("inbox listener: %s; listening again", e)
            with self._lock:
                self._quiet.clear()
            self._closing.wait(pause)
            pause = min(pause * 2, 5.0)

    def close(self) -> None:
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def __repr__(self) -> str:
        return f"Bell({self._channel!r}, listening={bool(self._epoch)})"


class PgInbox:
    """Post, read and take a run's messages (see `Inbox`), for a `PostgresEventStore`:
    `tokens` are the store's lease tokens, `refused(conn, run, token)` says why a driver's
    write moved nothing, `unknown(run)` makes the error for a run not in the catalog."""

    def __init__(
        self,
        db: Connections,
        schema: str,
        tokens: Tokens,
        refused: Callable[[Conn, str, str | None], LeaseLost | None],
        unknown: Callable[[str], UnknownRun],
    ) -> None:
        self._db = db
        self._tokens = tokens
        self._refused = refused
        self._unknown = unknown
        self._bell = Bell(db.connect, inbox_channel(schema))

    def post(self, run_id: str, kind: str, payload: str) -> int:
        what = f"post a message to run {run_id!r}"
        posted_at = time.time()
        for _ in range(20):  # two posts to one run at once: the second takes the next number

            def insert(conn: Conn) -> Any:
                return conn.execute(_POST, (run_id, kind, payload, posted_at, run_id)).fetchone()

            try:
                row = self._db.transact(what, insert, conflict="taken", retry=False)
            except ConcurrencyError:
                continue
            if row is None:
                raise self._unknown(run_id)
            return int(row[0])
        raise StoreError(f"Could not {what}: too many messages were posted to it at once.")

    def pending(self, run_id: str) -> list[InboxMessage]:
        if self._bell.quiet(run_id):
            return []
        ticket = self._bell.ticket(run_id)
        rows = self._db.rows(_PENDING, (run_id,))
        if not rows:
            self._bell.found_none(run_id, ticket)
        return [InboxMessage(run_id, r[0], r[1], r[2], r[3]) for r in rows]

    def take(self, run_id: str, upto: int) -> None:
        token = self._tokens.for_write(run_id)  # a lost run: refused before the database
        if token is None:
            raise not_driving(run_id)

        def mark(conn: Conn) -> None:
            moved = conn.execute(
                b"UPDATE inbox SET taken = true WHERE run_id = %s AND n <= %s AND NOT taken "
                b"AND EXISTS (SELECT FROM runs WHERE run_id = %s AND driver_token = %s)",
                (run_id, upto, run_id, token),
            ).rowcount
            if moved == 0:
                lost = self._refused(conn, run_id, token)
                if lost is not None:
                    raise lost

        self._db.transact(f"take the messages of run {run_id!r}", mark)

    def close(self) -> None:
        self._bell.close()

    def __repr__(self) -> str:
        return f"PgInbox({self._bell!r})"
