"""Call one tool function with a deadline: sync functions on a daemon worker thread (one call at a
time each, kept for later calls), async ones as a task. A call that misses its deadline is
abandoned at once: nothing waits for its thread (not even the end of `asyncio.run`), and whatever
it returns later is dropped."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import queue
import threading
from collections.abc import Callable
from typing import Any, Literal

Settled = tuple[Literal["ok", "error", "stop"], Any]
"""("ok", result), ("error", the exception the tool raised), or ("stop", a KeyboardInterrupt or
SystemExit the tool raised, which the caller re-raises once the call is recorded)."""


def _settle(call: Callable[[], Any]) -> Settled:
    try:
        return "ok", call()
    except (KeyboardInterrupt, SystemExit) as e:
        return "stop", e
    except BaseException as e:  # a tool's own CancelledError is its failure too
        return "error", e


class _Workers:
    """Daemon threads kept for sync tool calls, so that a call does not start a thread: a call
    takes an idle worker or starts one; a worker joins the idle ones once its call returns (an
    abandoned call's worker too, when the call ends at last). At most `_IDLE` stay idle."""

    _IDLE = 8

    def __init__(self) -> None:
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []
        self._lock = threading.Lock()

    def run(self, job: Callable[[], None]) -> None:
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            thread = threading.Thread(target=self._serve, args=(inbox,), daemon=True)
            thread.start()
        inbox.put(job)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            inbox.get()()
            with self._lock:
                if len(self._idle) >= self._IDLE:
                    return
                self._idle.append(inbox)


_WORKERS = _Workers()


def _on_thread(func: Callable[[], Any], name: str) -> asyncio.Future[Settled]:
    """Run `func` on a worker thread, in a copy of the caller's context variables."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Settled] = loop.create_future()
    context = contextvars.copy_context()

    def deliver(settled: Settled) -> None:
        if not future.done():
            future.set_result(settled)

    def work() -> None:
        threading.current_thread().name = f"agentsm-tool-{name}"
        settled = _settle(lambda: context.run(func))
        try:
            loop.call_soon_threadsafe(deliver, settled)
        except RuntimeError:
            pass  # the loop is closed: the call was abandoned and nobody waits for it

    _WORKERS.run(work)
    return future


async def _guarded(func: Callable[[], Any], is_async: bool, name: str) -> Settled:
    try:
        if is_async:
            result = await func()
        else:
            kind, result = await _on_thread(func, name)
            if kind != "ok":
                return kind, result
        if inspect.isawaitable(result):
            result = await result
        return "ok", result
    except (KeyboardInterrupt, SystemExit) as e:
        return "stop", e
    except asyncio.CancelledError as e:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # abandoned, or the run itself was cancelled
        return "error", e  # the tool's own CancelledError: a failure like any other
    except Exception as e:
        return "error", e


async def call_at_once(func: Callable[[], Any]) -> Settled:
    """What a call that returns at once came to (a fast sync tool), called on this thread; an
    awaitable it returns is awaited, as `call_with_deadline` does."""
    kind, result = _settle(func)
    if kind != "ok" or not inspect.isawaitable(result):
        return kind, result
    return await _guarded(lambda: result, True, "")


async def call_with_deadline(
    func: Callable[[], Any], *, is_async: bool, name: str, limit: float | None
) -> Settled | None:
    """What the call came to, or None when it did not finish within `limit` seconds (it is
    then abandoned). If the awaiting task is cancelled, the call is abandoned too. The call
    runs as a task of its own from its first step (a tool may hold task-bound state, such as
    an anyio cancel scope, across its awaits)."""
    job = asyncio.ensure_future(_guarded(func, is_async, name))
    try:
        done, _ = await asyncio.wait({job}, timeout=limit)
    except asyncio.CancelledError:
        job.cancel()
        raise
    if not done:
        job.cancel()
        return None
    return job.result()
