"""Run a coroutine to completion from sync code, even inside a running event loop (Jupyter)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_START_TIMEOUT = 30.0
"""How long an interrupted caller waits for the helper thread's loop to start, at most."""


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`, or the same on a helper thread when a loop already runs here. The
    coroutine sees the caller's context variables either way, and Ctrl-C stops it either way:
    on the helper thread, a KeyboardInterrupt in the calling thread cancels the coroutine,
    waits for it to wind down (an engine records the run as stopped), and is raised again."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return _on_helper_thread(coro)


def _on_helper_thread(coro: Coroutine[Any, Any, T]) -> T:
    outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
    running: concurrent.futures.Future[asyncio.Task[T]] = concurrent.futures.Future()

    async def main() -> T:
        running.set_result(asyncio.current_task())  # type: ignore[arg-type]
        return await coro

    def work() -> None:
        try:
            outcome.set_result(asyncio.run(main()))
        except BaseException as e:  # handed to the calling thread as it is
            if not running.done():
                running.set_exception(e)
            outcome.set_exception(e)

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(work,), name="agentsm-run", daemon=True)
    try:
        thread.start()  # an interrupt may come while this waits for the thread to start
        return outcome.result()
    except KeyboardInterrupt:
        if _cancel(running):
            try:
                outcome.result()  # the run records that it stopped
            except BaseException:  # the interrupt is what the caller sees
                pass
        raise


def _cancel(running: concurrent.futures.Future[asyncio.Task[T]]) -> bool:
    """Cancel the coroutine's task once it runs; False if it never started."""
    try:
        task = running.result(timeout=_START_TIMEOUT)
        task.get_loop().call_soon_threadsafe(task.cancel)
    except concurrent.futures.TimeoutError:
        return False  # interrupted before the thread could be started
    except BaseException:  # it ended before it could be told (its loop is closed)
        pass
    return True
