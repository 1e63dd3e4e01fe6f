"""Call one tool function with a deadline: sync functions on a daemon thread of their own, async
ones as a task. A call that misses its deadline is abandoned at once: nothing waits for its
thread (not even the end of `asyncio.run`), and whatever it returns later is dropped."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
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


def _on_thread(func: Callable[[], Any], name: str) -> asyncio.Future[Settled]:
    """Run `func` on a new daemon thread, in a copy of the caller's context variables."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Settled] = loop.create_future()
    context = contextvars.copy_context()

    def deliver(settled: Settled) -> None:
        if not future.done():
            future.set_result(settled)

    def work() -> None:
        settled = _settle(lambda: context.run(func))
        try:
            loop.call_soon_threadsafe(deliver, settled)
        except RuntimeError:
            pass  # the loop is closed: the call was abandoned and nobody waits for it

    threading.Thread(target=work, name=f"agentsm-tool-{name}", daemon=True).start()
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


async def call_with_deadline(
    func: Callable[[], Any], *, is_async: bool, name: str, limit: float | None
) -> Settled | None:
    """What the call came to, or None when it did not finish within `limit` seconds (it is
    then abandoned). If the awaiting task is cancelled, the call is abandoned too."""
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
