"""Wake-ups of an event loop's waiters for the writer's commits, a few at a time.

One group commit may finish the writes of hundreds of runs at once. Woken all together, their
tasks would run back to back before the loop looks at its timers again (asyncio runs every
callback that is ready before it checks them), so a heartbeat on the same loop would wait for
all of them. Here the waiters of each loop are woken `BATCH` at a time, one batch per turn of
the loop: a timer that falls due waits for one batch at most, and the runs lose no throughput.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections import deque
from typing import Any, TypeVar

__all__ = ["BATCH", "committed"]

T = TypeVar("T")

BATCH = 8
"""Waiters woken per turn of the loop."""


class _Waker:
    """The waiters of one loop whose writes are done, woken `BATCH` per turn of the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop_ref = weakref.ref(loop)  # the loop's own entry in `_wakers` must not keep it
        self._done: deque[tuple[asyncio.Future[Any], concurrent.futures.Future[Any]]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def watch(self, write: concurrent.futures.Future[T]) -> asyncio.Future[T]:
        """A future of this loop that gets what `write` (a writer's future) ends with."""
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        write.add_done_callback(lambda done: self._finished(waiter, done))
        return waiter

    def _finished(self, waiter: asyncio.Future[Any], write: concurrent.futures.Future[Any]) -> None:
        """On the writer's thread: queue the waiter, and wake the loop if it is not woken yet."""
        with self._lock:
            self._done.append((waiter, write))
            if self._scheduled:
                return
            self._scheduled = True
        loop = self._loop_ref()
        try:
            if loop is not None:
                loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _wake(self) -> None:
        """On the loop: wake a batch of waiters, and come back for the rest at the next turn."""
        for _ in range(BATCH):
            with self._lock:
                if not self._done:
                    self._scheduled = False
                    return
                waiter, write = self._done.popleft()
            if waiter.done():  # cancelled by someone else: nobody waits for it any more
                continue
            error = write.exception()
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(write.result())
        with self._lock:
            if not self._done:
                self._scheduled = False
                return
        asyncio.get_running_loop().call_soon(self._wake)


_wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waker] = weakref.WeakKeyDictionary()
_wakers_lock = threading.Lock()


async def committed(write: concurrent.futures.Future[T]) -> T:
    """What the writer's `write` ended with, awaited without blocking the loop (woken with the
    other waiters of this loop a batch at a time). If the awaiting task is cancelled, the write
    still ends whole or not at all, and the cancellation is raised once it is known which (its
    error instead, if it failed)."""
    loop = asyncio.get_running_loop()
    with _wakers_lock:
        waker = _wakers.get(loop)
        if waker is None:
            waker = _wakers[loop] = _Waker(loop)
    waiter = waker.watch(write)
    try:
        return await asyncio.shield(waiter)
    except asyncio.CancelledError:
        # under way: the caller learns how it ended first, awaited (never `write.result()`, which
        # would stop the loop until the commit ends), through further cancellations too
        while not waiter.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(waiter)
        if not waiter.cancelled():
            waiter.result()  # its error instead, if it failed (done: nothing to wait for)
        raise
