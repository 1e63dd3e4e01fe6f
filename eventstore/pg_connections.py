"""The connections of a PostgreSQL store: a psycopg pool set to the log's schema, transactions
and batches, a LISTEN connection, and psycopg's errors re-raised as the store's own.

Networks blip and servers restart: a pooled connection is checked before it is handed out, and
an operation that meets an operational error (a connection closed or reset, the server shutting
down, a serialization failure or deadlock) is tried again with growing pauses until `retry`
seconds have passed. A write whose commit may have happened before the connection dropped is
first checked against what is stored (the caller's `committed`), so it is never applied twice.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

import psycopg
import psycopg_pool
from psycopg import errors as pgerrors
from psycopg import sql

from .errors import ConcurrencyError, StoreError

__all__ = ["Conn", "Connections", "TRANSIENT"]

Conn = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")

log = logging.getLogger("eventstore.postgres")

TRANSIENT: tuple[type[BaseException], ...] = (psycopg.OperationalError, psycopg_pool.PoolTimeout)
"""The errors an operation is tried again after: connections closed, reset or not to be had,
the server shutting down, serialization failures and deadlocks (all operational in psycopg)."""


class _Transient(StoreError):
    """An operational error met by one try (a `StoreError` with the store's message for it, if
    it reaches a caller that does not try again)."""


class Connections:
    """A pool of connections to `conninfo` with `search_path` set to `schema` (read-only ones
    when `read_only`). `url` is the address without its password, for messages."""

    def __init__(
        self,
        conninfo: str,
        url: str,
        schema: str,
        *,
        read_only: bool,
        pool_size: int,
        connect_timeout: float,
        retry: float = 30.0,
    ) -> None:
        self.url = url
        self.retry = retry
        """Seconds within which an operation that met an operational error is tried again."""
        self.schema = schema
        self.closed = False
        self._conninfo = conninfo
        self._timeout = max(1, round(connect_timeout))
        self._configure = _configure(schema, read_only)
        self._local = threading.local()  # the connection of a batch() open in this thread
        self._listener: Conn | None = None
        self._listen_lock = threading.Lock()
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._pool_size = max(2, pool_size)

    def open_pool(self) -> None:
        """Start the pool (after the schema is known to be there)."""
        self._pool = psycopg_pool.ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"autocommit": True, "connect_timeout": self._timeout},
            configure=self._configure,
            check=psycopg_pool.ConnectionPool.check_connection,  # a dead one is never handed out
            timeout=self._timeout,
            name=f"agentsm {self.url}",
            open=True,
        )
        # Connections dropped without close() (or inside a reference cycle) still close their
        # pool, from a thread of its own: never from a pool worker, which cannot join itself.
        self._finalizer = weakref.finalize(self, _close_pool, self._pool)

    def connect(self) -> Conn:
        """A connection of its own, outside the pool (schema set up, listening)."""
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=self._timeout)
        except psycopg.Error as e:
            raise self.unreachable(e) from e
        try:
            self._configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def unreachable(self, e: BaseException) -> StoreError:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        return StoreError(
            f"Cannot connect to {self.url}: is the server running, and does the URL name the "
            f"right host, port, user and database? ({reason})"
        )

    def failed(self, e: psycopg.Error, what: str) -> StoreError:
        if isinstance(e, pgerrors.ReadOnlySqlTransaction):
            return StoreError(f"Could not {what}: this store was opened read-only.")
        if isinstance(e, psycopg.OperationalError):
            return StoreError(f"Could not {what}: {self.what_happened(e)}.")
        return StoreError(f"Could not {what}; nothing was written ({e}).")

    def what_happened(self, e: BaseException) -> str:
        """An operational error in words, without guessing beyond what it says."""
        text = " ".join(str(e).split())
        if isinstance(e, pgerrors.AdminShutdown | pgerrors.CrashShutdown):
            return (
                f"the connection to PostgreSQL at {self.url} was closed by the server "
                f"(an administrator ended it, or the server is shutting down: {text})"
            )
        if isinstance(e, pgerrors.TransactionRollback):
            return f"PostgreSQL at {self.url} rolled the transaction back ({text})"
        if isinstance(e, psycopg_pool.PoolTimeout):
            return (
                f"no connection to PostgreSQL at {self.url} could be opened ({text}); check that "
                "the server is up and reachable"
            )
        if "connection" in text.lower() and ("closed" in text.lower() or "lost" in text.lower()):
            return f"the connection to PostgreSQL at {self.url} was lost ({text})"
        return f"PostgreSQL at {self.url} failed ({text})"

    def retrying(
        self,
        what: str,
        work: Callable[[], T],
        *,
        committed: Callable[[], bool] | None = None,
        retry: bool = True,
    ) -> T:
        """`work()`, tried again while it meets operational errors, for up to `self.retry`
        seconds with growing pauses (not inside a batch: a batch fails whole). Before a write
        is tried again, `committed()` says whether its first try committed after all (its
        connection dropped after the server committed): then it is not tried again."""
        if not retry or self.in_batch():
            return work()
        deadline = time.monotonic() + self.retry
        pause, tries, unsure = 0.05, 0, False
        while True:
            tries += 1
            try:
                if unsure and committed is not None and committed():
                    return None  # type: ignore[return-value]  # the first try committed
                return work()
            except _Transient as e:
                unsure = True
                if time.monotonic() + pause > deadline or self.closed:
                    raise StoreError(
                        f"{e} Tried {tries} times over {self.retry:g} s; give the server "
                        "time to come back, then try again (a run stopped by this is resumable)."
                    ) from e.__cause__
                log.info("%s; trying again in %.2f s", e, pause)
                time.sleep(pause * random.uniform(0.5, 1.0))
                pause = min(pause * 2, 2.0)

    def in_batch(self) -> bool:
        """Whether this thread writes inside an open batch (nothing is committed until it ends)."""
        return getattr(self._local, "conn", None) is not None

    @contextmanager
    def connection(self, what: str, *, conflict: str | None = None) -> Iterator[Conn]:
        """A connection of the pool (or the open batch's), its errors re-raised as ours: a
        unique key violated is `ConcurrencyError(conflict)` when the caller expects one."""
        try:
            batch: Conn | None = getattr(self._local, "conn", None)
            if batch is not None:
                yield batch
                return
            if self.closed or self._pool is None:
                raise StoreError(f"Could not {what}: the store of {self.url} is closed.")
            with self._pool.connection() as conn:
                yield conn
        except TRANSIENT as e:
            raise _Transient(f"Could not {what}: {self.what_happened(e)}.") from e
        except pgerrors.UniqueViolation as e:
            if conflict is None:
                raise self.failed(e, what) from e
            raise ConcurrencyError(conflict) from e
        except psycopg.Error as e:
            raise self.failed(e, what) from e

    @contextmanager
    def transaction(
        self,
        what: str,
        *,
        wait_for_disk: bool = False,
        pipeline: bool = False,
        conflict: str | None = None,
    ) -> Iterator[Conn]:
        """One transaction (or part of the open batch's): all of it is committed or, on any
        failure, none of it. Its commit waits for the server's disk only if `wait_for_disk`
        (connections commit with `synchronous_commit = off` otherwise). `pipeline` sends the
        statements with fewer round trips: their results (and errors) come at the end of the
        block, so they must not depend on each other's results."""
        with self.connection(what, conflict=conflict) as conn:
            if self.in_batch():
                yield conn
                return
            with conn.pipeline() if pipeline else nullcontext(), conn.transaction():
                if wait_for_disk:
                    conn.execute("SET LOCAL synchronous_commit = on")
                yield conn

    def transact(
        self,
        what: str,
        work: Callable[[Conn], T],
        *,
        wait_for_disk: bool = False,
        pipeline: bool = False,
        conflict: str | None = None,
        committed: Callable[[], bool] | None = None,
        retry: bool = True,
    ) -> T:
        """`work(conn)` in one `transaction`, tried again after operational errors (see
        `retrying`; `committed` checks a first try whose outcome is unknown)."""

        def once() -> T:
            with self.transaction(
                what, wait_for_disk=wait_for_disk, pipeline=pipeline, conflict=conflict
            ) as conn:
                return work(conn)

        return self.retrying(what, once, committed=committed, retry=retry)

    def execute(
        self,
        what: str,
        query: bytes,
        params: Sequence[Any],
        *,
        wait_for_disk: bool = False,
        conflict: str | None = None,
        committed: Callable[[], bool] | None = None,
    ) -> int:
        """One statement as a transaction of its own (one round trip), or in the open batch;
        the number of rows it wrote (-1 when a first try turned out to have committed)."""

        def once() -> int:
            if wait_for_disk and not self.in_batch():
                with self.transaction(
                    what, wait_for_disk=True, pipeline=True, conflict=conflict
                ) as conn:
                    cur = conn.execute(query, params)
                return cur.rowcount
            with self.connection(what, conflict=conflict) as conn:
                return conn.execute(query, params).rowcount

        written = self.retrying(what, once, committed=committed)
        return -1 if written is None else written

    def rows(self, query: str, args: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """The rows of one query (tried again after operational errors)."""

        def once() -> list[Any]:
            with self.connection("read the log") as conn:
                return conn.execute(query.encode(), args).fetchall()

        return self.retrying("read the log", once)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every transaction of this thread inside the block becomes part of one."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self.connection("write the batch") as conn:
            try:
                with conn.transaction():
                    self._local.conn = conn
                    try:
                        yield
                    finally:
                        self._local.conn = None
            except psycopg.Error as e:
                raise self.failed(e, "write the batch") from e

    def wait_for_notify(self, channel: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a NOTIFY on `channel`: True when one came. The first
        call starts listening and returns True at once (what came before is to be read)."""
        with self._listen_lock:
            if self._listener is None:
                conn = self.connect()
                try:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                except psycopg.Error as e:
                    conn.close()
                    raise self.failed(e, "listen for new events") from e
                self._listener = conn
                return True
            try:
                return any(True for _ in self._listener.notifies(timeout=timeout, stop_after=1))
            except psycopg.Error as e:  # the connection dropped: listen again at the next call
                log.info("%s; listening again", self.what_happened(e))
                self._listener.close()
                self._listener = None
                return True  # something may have been committed meanwhile: read

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        if self._pool is not None:
            self._finalizer.detach()
            self._pool.close()


def _close_pool(pool: psycopg_pool.ConnectionPool) -> None:
    try:
        threading.Thread(target=pool.close, name="closing an unused pool", daemon=True).start()
    except RuntimeError:  # at interpreter shutdown no thread starts: the main thread closes it
        pool.close()


def _configure(schema: str, read_only: bool) -> Callable[[Conn], None]:
    """What each new connection runs first: the log's schema, commits that do not wait for the
    disk unless a transaction asks, and read-only when asked."""

    def configure(conn: Conn) -> None:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("SET synchronous_commit TO off")
        if read_only:
            conn.execute("SET default_transaction_read_only = on")

    return configure
