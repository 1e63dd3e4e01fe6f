"""The MCP SDK side of MCP tools: sessions over stdio or streamable HTTP on the installed SDK
(`mcp.Client` in 2.x, a `ClientSession` over the transport in 1.x), a connection held by a task
of its own, and a call's result as the text (and images) the LLM reads."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import importlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TextIO

from .images import Image
from .types import McpServerSpec

__all__ = [
    "Connection",
    "broken",
    "content",
    "field",
    "http_transport",
    "reason",
    "session",
    "text",
]

_CONNECTION_CLOSED = -32000
"""The JSON-RPC error code the SDK gives a request whose connection closed (1.x and 2.x)."""

_CLOSE_WAIT = 10.0
"""How long closing a connection waits for the server to wind down before it is cancelled."""


@contextlib.asynccontextmanager
async def session(
    spec: McpServerSpec, env: dict[str, str], headers: dict[str, str]
) -> AsyncIterator[Any]:
    """A session with the server on the installed SDK: `mcp.Client` (2.x), or a `ClientSession`
    over the transport (1.x); both list and call tools alike."""
    sdk: Any = importlib.import_module("mcp")
    async with contextlib.AsyncExitStack() as stack:
        if spec.transport == "stdio":
            stdio: Any = importlib.import_module("mcp.client.stdio")
            params = sdk.StdioServerParameters(
                command=spec.command, args=list(spec.args), env=env or None
            )
            transport = stdio.stdio_client(params, errlog=_errlog())
        else:
            transport = http_transport(spec.url, headers)
        if hasattr(sdk, "Client"):  # 2.x
            yield await stack.enter_async_context(sdk.Client(transport))
            return
        streams = await stack.enter_async_context(transport)
        session = await stack.enter_async_context(sdk.ClientSession(streams[0], streams[1]))
        await session.initialize()
        yield session


def _errlog() -> TextIO:
    """Where a stdio server's stderr goes: ours, or the process's own when ours is not a file
    (a Jupyter kernel's stream, a redirect to StringIO), since a child process needs a file."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None and stream.fileno() >= 0:
                return stream
        except (OSError, ValueError):  # io.UnsupportedOperation, or a closed stream
            continue
    return sys.stderr


@contextlib.asynccontextmanager
async def http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with our headers, its HTTP client (of the HTTP library the SDK uses:
    httpx2 or httpx) closed with it; timeouts are the SDK's defaults (300s to read a stream)."""
    transport: Any = importlib.import_module("mcp.client.streamable_http")
    library: Any = getattr(transport, "httpx2", None) or transport.httpx
    timeout = library.Timeout(30.0, read=300.0)
    async with (
        library.AsyncClient(headers=headers, timeout=timeout) as client,
        transport.streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


class Connection:
    """One live client, entered and left by a task of its own (the SDK's task groups must be
    left by the task that entered them); calls from any task of the same loop go through it."""

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        self._opener = opener
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.client: Any = None

    @classmethod
    async def open(
        cls, opener: Callable[[], AbstractAsyncContextManager[Any]], timeout: float, name: str
    ) -> Connection:
        """A connection with the session `opener()` gives, ready within `timeout` seconds."""
        connection = cls(opener)
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        connection._task = asyncio.create_task(connection._hold(ready), name=f"agentsm-mcp-{name}")
        try:
            connection.client = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except BaseException:
            await connection.aclose()
            raise
        return connection

    async def _hold(self, ready: asyncio.Future[Any]) -> None:
        try:
            async with self._opener() as client:
                ready.set_result(client)
                await self._stop.wait()
        except Exception as e:  # handed to the opener; after that, the calls see it
            if not ready.done():
                ready.set_exception(e)

    async def aclose(self) -> None:
        """Leave the client (for stdio the server process is stopped), waiting a bounded time."""
        self._stop.set()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=_CLOSE_WAIT)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def broken(e: BaseException) -> bool:
    """Whether a failed call means the connection is gone; an error the server answered with
    (a JSON-RPC error with its own code) leaves the connection, and the server's state, as is."""
    code = getattr(e, "code", None)
    if code is None:
        code = getattr(getattr(e, "error", None), "code", None)
    return not isinstance(code, int) or code == _CONNECTION_CLOSED


def reason(e: BaseException) -> str:
    """The leaves of an exception (group), as `Type: message`."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(reason(x) for x in e.exceptions))
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def field(item: Any, name: str, v1_name: str) -> Any:
    """A field of an SDK model: snake_case in mcp 2.x, camelCase in 1.x."""
    return getattr(item, name, getattr(item, v1_name, None))


def text(result: Any) -> str:
    """A call's result as the text the LLM reads: text parts as they are, other parts named."""
    parts: list[str] = []
    for item in result.content:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(str(getattr(item, "text", "")))
        elif kind == "resource":
            resource = getattr(item, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[resource {resource}]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(item, 'uri', '')}]")
        else:
            parts.append(f"[{kind} {field(item, 'mime_type', 'mimeType') or ''}".rstrip() + "]")
    structured = field(result, "structured_content", "structuredContent")
    if not parts and structured is not None:
        return json.dumps(structured, sort_keys=True, default=str)
    return "\n".join(parts)


def content(result: Any) -> str | list[str | Image]:
    """A call's result as the LLM takes it: its text (`text`), or, when it holds images, its
    parts in order, each image an `Image` of its bytes (named `[image TYPE]` in the text, as
    before: `ToolOutcome.ok`)."""
    items = list(result.content)
    if not any(getattr(item, "type", "") == "image" for item in items):
        return text(result)
    parts: list[str | Image] = []
    for item in items:
        if getattr(item, "type", "") != "image":
            parts.append(text(_Only(item)))
            continue
        kind = field(item, "mime_type", "mimeType") or None
        try:
            parts.append(Image.from_bytes(base64.b64decode(getattr(item, "data", "")), kind))
        except (ValueError, binascii.Error):  # not an image this caller can send: named only
            parts.append(f"[image {kind or ''}]".replace(" ]", "]"))
    return parts


class _Only:
    """A result of one content item (to phrase it as `text` does)."""

    def __init__(self, item: Any) -> None:
        self.content = [item]
        self.structured_content = None
