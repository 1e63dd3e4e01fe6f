"""The writer: one thread per store that commits its writes, so that no caller's thread (an
event loop's least of all) waits on SQLite's lock or disk, and writes that arrive together share
one transaction (group commit). A write that would wait for nothing (no other thread committing,
no other process holding the database, no sync to disk) is committed at once on the caller's
thread instead (`try_now`): handing it to the thread and back costs more than the commit.

Each write runs in a savepoint of its own inside the group's transaction: one that fails (a
`ConcurrencyError`, an unknown run) is undone alone and reported to its caller alone, the others
of the group commit. A failure of the transaction itself (the lock never came, the COMMIT
failed) fails every write of the group, with nothing written.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded with the first write, not by a store that only reads
    from concurrent.futures import Future

from .errors import StoreError

__all__ = ["Settled", "Writer"]

_MOST = 1000
"""At most this many writes in one transaction."""


class Settled:
    """The outcome of a write committed on the caller's thread (`Writer.try_now`): what a
    future of it would hold, without a future's locks (it is done when the caller gets it)."""

    __slots__ = ("_error", "_value")

    def __init__(self) -> None:
        self._value: Any = None
        self._error: BaseException | None = None

    def set_result(self, value: Any) -> None:
        self._value = value

    def set_exception(self, error: BaseException) -> None:
        self._error = error

    def done(self) -> bool:
        return True

    def result(self) -> Any:
        """What the write returned, or raise what it raised."""
        if self._error is not None:
            raise self._error
        return self._value

    def __repr__(self) -> str:
        return f"Settled({'failed' if self._error is not None else 'committed'})"


@dataclass(slots=True)
class _Job:
    write: Callable[[sqlite3.Connection], Any]
    what: str
    sync: bool  # synced to disk before the commit returns (synchronous FULL)
    future: Future[Any] | Settled


class Writer:
    """Commits the writes submitted to it on a thread of its own (started on the first one),
    on `conn`, holding `lock` for each group's transaction."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock, name: str) -> None:
        self._conn = conn
        self._lock = lock
        self._name = name
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()
        self.transactions = 0
        """How many transactions this writer committed or tried to (for benchmarks and tests)."""

    def submit(
        self, write: Callable[[sqlite3.Connection], Any], what: str, *, sync: bool = False
    ) -> Future[Any]:
        """Queue `write` for the next transaction; the future gets what it returned, or what it
        raised (an `sqlite3.Error` as a `StoreError` saying that nothing was written)."""
        from concurrent.futures import Future

        future: Future[Any] = Future()
        self._queue.put(_Job(write, what, sync, future))
        if self._thread is None or not self._thread.is_alive():  # the first, or after a fork
            with self._starting:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(
                        target=_serve, args=(self,), name=self._name, daemon=True
                    )
                    self._thread.start()
        return future

    def commit_now(
        self, write: Callable[[sqlite3.Connection], Any], what: str, *, sync: bool = False
    ) -> Future[Any]:
        """Commit `write` in a transaction of its own on the caller's thread (a store private
        to one thread needs no writer thread); the future is done when this returns."""
        from concurrent.futures import Future

        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        self._commit([_Job(write, what, sync, future)])
        return future

    def try_now(
        self,
        write: Callable[[sqlite3.Connection], Any],
        what: str,
        *,
        busy_timeout: float | None,
    ) -> Future[Any] | Settled | None:
        """Commit `write` at once on the caller's thread when nothing else is writing: no
        thread hop, which costs more than the commit itself. None, with nothing done, when the
        store's lock is taken (the writer thread, or another thread, is committing) or another
        process holds the database's: then `submit` it. The database's lock is tried without
        waiting (an event loop must not sit in SQLite's busy handler), then the connection's
        wait of `busy_timeout` seconds is set back; None: no other process can hold it (a
        database in memory), so it is not tried apart."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            conn = self._conn
            if busy_timeout is not None:
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError:
                    return None  # locked by another process: the writer thread waits for it
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            settled = Settled()
            self._commit([_Job(write, what, False, settled)], begun=busy_timeout is not None)
            return settled
        finally:
            self._lock.release()

    def on_thread(self) -> bool:
        """Whether the caller is the writer's own thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def close(self, *, wait: bool = True) -> None:
        """Commit what was submitted, then stop the thread (waiting for it if `wait`)."""
        self._queue.put(None)
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    def _commit(self, group: list[_Job], *, begun: bool = False) -> None:
        """Run `group` in one transaction (`begun`: its `BEGIN IMMEDIATE` was run already)."""
        conn = self._conn
        outcomes: list[tuple[bool, Any]] = []
        sync = any(job.sync for job in group)
        self.transactions += 1
        try:
            with self._lock:
                if sync:
                    conn.execute("PRAGMA synchronous = FULL")
                try:
                    if not begun:
                        conn.execute("BEGIN IMMEDIATE")
                    try:
                        for job in group:
                            outcomes.append(_attempt(conn, job, alone=len(group) == 1))
                        conn.execute("COMMIT")
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                finally:
                    if sync:
                        conn.execute("PRAGMA synchronous = NORMAL")
        except _Alone as e:  # the only write failed: its transaction was rolled back
            group[0].future.set_exception(e.error)
            return
        except sqlite3.Error as e:
            for job in group:
                job.future.set_exception(_failed(job, e))
            return
        except BaseException as e:  # the writer itself failed: nothing of the group is known
            for job in group:
                if not job.future.done():
                    job.future.set_exception(e)
            return
        for job, (ok, value) in zip(group, outcomes, strict=True):
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)


def _failed(job: _Job, e: sqlite3.Error) -> StoreError:
    error = StoreError(f"Could not {job.what}; nothing was written ({e}).")
    error.__cause__ = e
    return error


def _attempt(conn: sqlite3.Connection, job: _Job, *, alone: bool) -> tuple[bool, Any]:
    """Run one write; (True, its result) or (False, the error), the write undone on error."""
    if alone:  # its own transaction: an error rolls all of it back
        try:
            return True, job.write(conn)
        except sqlite3.Error as e:
            raise _Alone(_failed(job, e)) from e
        except Exception as e:
            raise _Alone(e) from e
    conn.execute("SAVEPOINT write")
    try:
        value = job.write(conn)
    except Exception as e:
        conn.execute("ROLLBACK TO write")
        conn.execute("RELEASE write")
        return False, _failed(job, e) if isinstance(e, sqlite3.Error) else e
    conn.execute("RELEASE write")
    return True, value


class _Alone(Exception):
    """The error of the only write of a transaction, which rolls the transaction back."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _serve(writer: Writer) -> None:
    """The writer thread: take every write waiting, commit them in one transaction, repeat."""
    take = writer._queue
    while True:
        job = take.get()
        if job is None:
            return
        group = [job]
        stop = False
        while len(group) < _MOST:
            try:
                more = take.get_nowait()
            except queue.Empty:
                break
            if more is None:
                stop = True
                break
            group.append(more)
        group = [job for job in group if job.future.set_running_or_notify_cancel()]  # type: ignore[union-attr]
        if group:
            writer._commit(group)
        if stop:
            return
