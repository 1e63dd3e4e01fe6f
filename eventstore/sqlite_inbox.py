"""The inbox of a SQLite store (`Inbox`): messages posted to a run from anywhere, taken by its
driver only. The writes go through the store's writer like its appends; `pending`, which a
driver asks at every step, reads on a connection of its own, so it never waits for the writer
(WAL readers do not wait for writers)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from .errors import ConcurrencyError, StoreError, UnknownRun
from .records import InboxMessage

__all__ = ["InboxReader", "not_driving", "post_write", "take_write"]

_PENDING = "SELECT n, kind, payload, posted_at FROM inbox WHERE run_id = ? AND taken = 0 ORDER BY n"


def not_driving(run_id: str) -> ConcurrencyError:
    """The error of a `take` by a store that does not drive the run."""
    return ConcurrencyError(
        f"Run {run_id!r} is not driven by this store: only its driver takes its messages "
        "(claim it first). Nothing was taken."
    )


def post_write(
    run_id: str, kind: str, payload: str, unknown: Callable[[str], UnknownRun]
) -> Callable[[sqlite3.Connection], int]:
    """The write of one `post`, returning the message's number (the run's next)."""
    posted_at = time.time()

    def write(conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "INSERT INTO inbox (run_id, n, kind, payload, posted_at) "
            "SELECT run_id, (SELECT COALESCE(MAX(n), 0) + 1 FROM inbox WHERE run_id = ?), "
            "?, ?, ? FROM runs WHERE run_id = ? RETURNING n",
            (run_id, kind, payload, posted_at, run_id),
        ).fetchone()
        if row is None:
            raise unknown(run_id)
        return int(row[0])

    return write


def take_write(
    run_id: str,
    upto: int,
    token: str,
    refused: Callable[[sqlite3.Connection, str, str | None], None],
) -> Callable[[sqlite3.Connection], None]:
    """The write of one `take` by the driver holding `token` (`refused` says why a write of
    the driver's moved nothing: the run is unknown, or another driver has it)."""

    def write(conn: sqlite3.Connection) -> None:
        driving = conn.execute(
            "SELECT 1 FROM runs WHERE run_id = ? AND driver_token = ?", (run_id, token)
        ).fetchone()
        if driving is None:
            refused(conn, run_id, token)
            raise StoreError(f"Run {run_id!r} moved under this store's take; nothing was taken.")
        conn.execute(
            "UPDATE inbox SET taken = 1 WHERE run_id = ? AND n <= ? AND taken = 0", (run_id, upto)
        )

    return write


class InboxReader:
    """Reads a store's pending messages on a connection of its own (`connect`), or on the
    store's own connection under its lock for a database in memory (`shared`), which no other
    connection sees. A log from before the inbox (read-only opens take it as it is) has none."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection] | None,
        shared: tuple[sqlite3.Connection, threading.RLock],
        unusable: Callable[[sqlite3.DatabaseError], StoreError],
    ) -> None:
        self._connect = connect
        self._shared = shared
        self._unusable = unusable
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock() if connect is not None else shared[1]
        self._missing: bool | None = None

    def pending(self, run_id: str) -> list[InboxMessage]:
        """The run's messages not taken yet, oldest first."""
        with self._lock:
            conn = self._connection()
            try:
                if self._missing is None:
                    self._missing = not conn.execute(
                        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'inbox'"
                    ).fetchone()
                if self._missing:
                    return []
                rows: list[Any] = conn.execute(_PENDING, (run_id,)).fetchall()
            except sqlite3.DatabaseError as e:
                raise self._unusable(e) from e
        return [InboxMessage(run_id, r[0], r[1], r[2], r[3]) for r in rows]

    def _connection(self) -> sqlite3.Connection:
        if self._connect is None:
            return self._shared[0]
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __repr__(self) -> str:
        return f"InboxReader(own connection={self._connect is not None})"
