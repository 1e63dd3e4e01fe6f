"""The connections of a PostgreSQL store: a psycopg pool set to the log's schema, transactions
and batches, a LISTEN connection, and psycopg's errors re-raised as the store's own."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import psycopg
import psycopg_pool
from psycopg import errors as pgerrors
from psycopg import sql

from .errors import ConcurrencyError, StoreError

__all__ = ["Conn", "Connections"]

Conn = psycopg.Connection[tuple[Any, ...]]


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
    ) -> None:
        self.url = url
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
            return self.unreachable(e)
        return StoreError(f"Could not {what}; nothing was written ({e}).")

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
        except psycopg_pool.PoolTimeout as e:
            raise self.unreachable(e) from e
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

    def execute(
        self,
        what: str,
        query: bytes,
        params: Sequence[Any],
        *,
        wait_for_disk: bool = False,
        conflict: str | None = None,
    ) -> int:
        """One statement as a transaction of its own (one round trip), or in the open batch;
        the number of rows it wrote."""
        if wait_for_disk and not self.in_batch():
            with self.transaction(
                what, wait_for_disk=True, pipeline=True, conflict=conflict
            ) as conn:
                cur = conn.execute(query, params)
            return cur.rowcount
        with self.connection(what, conflict=conflict) as conn:
            return conn.execute(query, params).rowcount

    def rows(self, query: str, args: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """The rows of one query."""
        with self.connection("read the log") as conn:
            return conn.execute(query.encode(), args).fetchall()

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
            except psycopg.Error as e:
                self._listener.close()
                self._listener = None
                raise self.unreachable(e) from e

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
