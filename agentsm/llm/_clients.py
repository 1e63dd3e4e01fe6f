"""One SDK client per event loop: an async client's connection pool belongs to the loop that
opened its connections, so a caller serving runs on several loops (each sync `run()` has its
own) keeps one client for each, closed when its loop shuts down."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["LoopClients"]

C = TypeVar("C")


class LoopClients(Generic[C]):
    """`await clients.get()` is the client of the running loop, made on first use.

    Each client is held by an async generator started on its loop: `asyncio.run()` (and any
    loop that calls `shutdown_asyncgens()`) closes it before the loop closes, so no connection
    outlives its loop. A loop closed without that leaves its client to the garbage collector.
    """

    def __init__(self, make: Callable[[], C], close: Callable[[C], Awaitable[None]]) -> None:
        self._make = make
        self._close = close
        self._held: dict[asyncio.AbstractEventLoop, tuple[C, AsyncIterator[None]]] = {}
        self._lock = threading.Lock()

    async def get(self) -> C:
        """The running loop's client (a new one on a loop not seen before)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for gone in [old for old in self._held if old.is_closed()]:
                del self._held[gone]
            held = self._held.get(loop)
            if held is not None:
                return held[0]
            client = self._make()
            keeper = self._keep(loop, client)
            self._held[loop] = (client, keeper)
        await keeper.__anext__()  # started here, so the loop closes it at shutdown
        return client

    async def aclose(self) -> None:
        """Close the running loop's client now (a later `get()` makes a new one)."""
        with self._lock:
            held = self._held.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held[1].aclose()  # type: ignore[attr-defined]

    async def _keep(self, loop: asyncio.AbstractEventLoop, client: C) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with self._lock:
                if loop in self._held and self._held[loop][0] is client:
                    del self._held[loop]
            await self._close(client)

    def __len__(self) -> int:
        with self._lock:
            return sum(not loop.is_closed() for loop in self._held)

    def __repr__(self) -> str:
        return f"LoopClients(open={len(self)})"
