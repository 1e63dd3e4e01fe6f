"""What one drive of a run (`run()`, `arun()`, `stream()`, `run_until()`) opens on its event loop,
closed when that drive ends: connections bound to the loop (MCP client sessions) never outlive
it, and two engines never share one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

__all__ = ["Closeable", "RunScope", "current_scope", "run_scope"]


class Closeable(Protocol):
    async def aclose(self) -> None: ...


R = TypeVar("R", bound=Closeable)


class RunScope:
    """Resources opened once per drive, by key, and closed together when the drive ends."""

    def __init__(self) -> None:
        self._open: dict[Hashable, asyncio.Future[Any]] = {}

    async def resource(self, key: Hashable, opener: Callable[[], Awaitable[R]]) -> R:
        """The resource under `key`, opened by `opener()` on first use (concurrent first users
        share one opening; a caller abandoned meanwhile does not cancel it for the others)."""
        opening = self._open.get(key)
        if opening is None or (
            opening.done() and (opening.cancelled() or opening.exception() is not None)
        ):
            opening = asyncio.ensure_future(opener())
            self._open[key] = opening
        result: R = await asyncio.shield(opening)
        return result

    async def discard(self, key: Hashable) -> None:
        """Close the resource under `key` (it broke): the next use opens another."""
        opening = self._open.pop(key, None)
        if opening is not None:
            await _close(opening)

    async def aclose(self) -> None:
        """Close everything opened in this scope."""
        openings, self._open = list(self._open.values()), {}
        for opening in openings:
            await _close(opening)


async def _close(opening: asyncio.Future[Any]) -> None:
    if not opening.done():
        opening.cancel()
        with contextlib.suppress(BaseException):
            await opening
        return
    if not opening.cancelled() and opening.exception() is None:
        await opening.result().aclose()


_current: ContextVar[RunScope | None] = ContextVar("agentsm_run_scope", default=None)


def current_scope() -> RunScope | None:
    """The scope of the drive this code runs in, if any."""
    return _current.get()


@contextlib.asynccontextmanager
async def run_scope() -> AsyncIterator[RunScope]:
    """A scope for one drive; what was opened in it is closed when it ends, however it ends."""
    scope = RunScope()
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)
        await scope.aclose()
