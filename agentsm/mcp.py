"""MCP tools: the tools of a Model Context Protocol server, through the official `mcp` SDK
(`pip install 'agentsm[mcp]'`: 2.x, or 1.x from 1.30), as registry tools with the server's
schemas and descriptions.

When a server is contacted:

- its tool list is read when the agent is built (`build()`, `submit()`), over a connection of its
  own that is closed before `build()` returns; the list becomes part of the run's definition;
- a tool call connects on the first call that runs live in a drive of the run (`run()`, `arun()`,
  `stream()`); that connection (for stdio, one server process) serves the drive's later calls and
  is closed when the drive ends, however it ends, on the loop that opened it. A call made outside
  a drive (`ToolRegistry.execute`) has a connection of its own;
- a continued run (`attach`, resume) offers the tools its definition recorded, without listing;
- replay and branch serve recorded results: a server that cannot be reached then stands in with
  the tool list the run recorded (`AgentBuilder.mcp_recorded`), so nothing needs to run.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ._mcp_client import Connection, broken, content, field, reason, session, text
from ._scope import current_scope
from ._sync import run_sync
from .errors import BuildError, McpServerUnavailable
from .facts import RunStarted
from .images import Image
from .tools import Tool, ToolRegistry
from .types import McpServerSpec, ToolSchema

__all__ = ["McpServer", "McpToolError", "attached_tools", "resolve_tools"]

_INSTALL = "MCP tools need the official `mcp` SDK: pip install 'agentsm[mcp]'."


class McpToolError(Exception):
    """The server reported a call as failed (`isError`); its text becomes the observation."""


class McpServer:
    """One MCP server an agent uses: how to reach it, and (for a recorded one) its tool list.

    Build one with `McpServer.stdio(...)` or `McpServer.http(...)` (what
    `AgentBuilder.mcp_server_stdio` / `mcp_server_http` do). Tools are named as the server names
    them, after `prefix`. `timeout` bounds connecting and listing, in seconds; calls have the
    tools' timeout (`AgentConfig.tool_timeout`)."""

    def __init__(
        self,
        spec: McpServerSpec,
        *,
        env: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        recorded: Sequence[ToolSchema] | None = None,
    ) -> None:
        if timeout <= 0:
            raise BuildError(f"MCP server {spec.name!r}: timeout must be positive, not {timeout}.")
        self.spec = spec
        self.timeout = timeout
        self._env = dict(env or {})
        self._headers = dict(headers or {})
        self._recorded = None if recorded is None else tuple(recorded)

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        prefix: str = "",
        timeout: float = 30.0,
    ) -> McpServer:
        """A server started as a child process (`command args...`, with `env` added to the
        environment), spoken to over its stdin and stdout."""
        _require_sdk()
        if not isinstance(command, str) or not command:
            raise BuildError(f"mcp_server_stdio needs the command as a string, not {command!r}.")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise BuildError(
                f"mcp_server_stdio({command!r}, args): args must be a list of strings."
            )
        spec = McpServerSpec(
            name=name or _stdio_name(command, args),
            transport="stdio",
            command=command,
            args=tuple(args),
            env=tuple(sorted(env or {})),
            prefix=prefix,
        )
        return cls(spec, env=env, timeout=timeout)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        prefix: str = "",
        timeout: float = 30.0,
    ) -> McpServer:
        """A server reached over streamable HTTP at `url` (e.g. `http://127.0.0.1:8000/mcp`),
        with `headers` sent on every request."""
        _require_sdk()
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise BuildError(
                f"mcp_server_http needs an http(s) URL such as http://127.0.0.1:8000/mcp, "
                f"not {url!r}."
            )
        spec = McpServerSpec(
            name=name or parts.netloc,
            transport="http",
            url=url,
            headers=tuple(sorted(headers or {})),
            prefix=prefix,
        )
        return cls(spec, headers=headers, timeout=timeout)

    @classmethod
    def recorded(cls, spec: McpServerSpec, tools: Sequence[ToolSchema]) -> McpServer:
        """A server as a run recorded it: it offers the recorded tools and is never contacted
        (running one of its tools fails: only recorded results exist)."""
        return cls(spec, recorded=tools)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def where(self) -> str:
        """How the server is reached, for messages."""
        if self.spec.transport == "http":
            return f"http: {self.spec.url}"
        return f"stdio: {' '.join([self.spec.command, *self.spec.args])}"

    # -- the tool list ----------------------------------------------------------------------

    async def alist_tools(self) -> tuple[ToolSchema, ...]:
        """The server's tools as the LLM will see them (names after the prefix), read over a
        connection of their own; `McpServerUnavailable` if the server cannot be reached."""
        if self._recorded is not None:
            return self._recorded
        import anyio

        tools: list[Any] = []
        try:
            with anyio.fail_after(self.timeout):
                async with self._session() as client:
                    cursor: str | None = None
                    while True:
                        page = await client.list_tools(cursor=cursor)
                        tools.extend(page.tools)
                        cursor = field(page, "next_cursor", "nextCursor")
                        if not cursor:
                            break
        except Exception as e:
            raise self._unavailable(e) from e
        return tuple(
            ToolSchema(
                name=self.spec.prefix + t.name,
                description=t.description or t.title or t.name,
                input_schema=dict(field(t, "input_schema", "inputSchema")),
            )
            for t in tools
        )

    def list_tools(self) -> tuple[ToolSchema, ...]:
        """`alist_tools` from sync code (inside a running loop too)."""
        return run_sync(self.alist_tools())

    def tools(self, schemas: Sequence[ToolSchema], prefix: str | None = None) -> list[Tool]:
        """Registry tools for these schemas of this server, each calling the server by its own
        name for the tool (the schema's name without `prefix`, by default the server's)."""
        cut = len(self.spec.prefix if prefix is None else prefix)
        return [
            Tool(s.name, s.description, dict(s.input_schema), self._caller(s, s.name[cut:]))
            for s in schemas
        ]

    def _caller(self, schema: ToolSchema, remote: str) -> Any:
        async def call(args: dict[str, Any]) -> str | list[str | Image]:
            return await self.acall(remote, args)

        call.__name__ = call.__qualname__ = schema.name
        return call

    # -- calls ------------------------------------------------------------------------------

    async def acall(self, tool: str, args: dict[str, Any]) -> str | list[str | Image]:
        """Call tool `tool` (the server's own name for it) and return its text, or its parts
        (text and `Image`s) when it returned images; a result the server marks as an error
        raises `McpToolError` with its text (the registry makes it a failed outcome, which the
        LLM reads)."""
        if self._recorded is not None:
            raise RuntimeError(
                f"MCP server {self.name!r} is not available here: only its recorded results "
                "are; pass a builder that declares the server to run its tools"
            )
        scope = current_scope()
        if scope is None:  # outside a drive: a connection for this call alone
            async with contextlib.AsyncExitStack() as stack:
                try:
                    client = await stack.enter_async_context(self._session())
                except Exception as e:
                    raise self._unavailable(e) from e
                result = await client.call_tool(tool, args)
        else:
            connection = await scope.resource(self, self._connect)
            try:
                result = await connection.client.call_tool(tool, args)
            except Exception as e:
                if broken(e):
                    await scope.discard(self)  # the next call connects again
                raise
        if field(result, "is_error", "isError"):
            raise McpToolError(text(result) or f"tool {tool!r} failed")
        return content(result)

    async def _connect(self) -> Connection:
        try:
            return await Connection.open(self._session, self.timeout, self.name)
        except Exception as e:
            raise self._unavailable(e) from e

    def _session(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """A connected, initialised session: `list_tools(cursor=...)`, `call_tool(name, args)`."""
        return session(self.spec, self._env, self._headers)

    def _unavailable(self, e: BaseException) -> McpServerUnavailable:
        if isinstance(e, McpServerUnavailable):
            return e
        why = f"no answer within {self.timeout}s" if isinstance(e, TimeoutError) else reason(e)
        spec = self.spec
        if spec.transport == "stdio" and not spec.args and len(spec.command.split()) > 1:
            try:  # a whole command line given as the program
                words = shlex.split(spec.command)
            except ValueError:
                words = spec.command.split()
            why += (
                f" (the command is one program, its arguments go apart: "
                f"mcp_server_stdio({words[0]!r}, {words[1:]!r}))"
            )
        return McpServerUnavailable(self.name, self.where, why)

    def __repr__(self) -> str:
        recorded = " recorded" if self._recorded is not None else ""
        return f"<McpServer {self.name!r}{recorded} {self.where}>"


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        raise BuildError(_INSTALL) from e


def _stdio_name(command: str, args: Sequence[str]) -> str:
    """A default name: the first argument that is not an option (the script or the package),
    else the command."""
    for arg in args:
        if not arg.startswith("-"):
            return Path(arg).stem or arg
    return Path(command).stem or command


# -- wiring into a builder's tools ----------------------------------------------------------


def _recorded(definition: RunStarted, server: McpServer) -> McpServerSpec | None:
    """The server of this name as `definition` recorded it, or None."""
    return next((s for s in definition.mcp_servers if s.name == server.name), None)


def _schemas(definition: RunStarted, spec: McpServerSpec) -> tuple[ToolSchema, ...]:
    schemas = {s.name: s for s in definition.tools}
    return tuple(schemas[n] for n in spec.tools if n in schemas)


def _add(
    registry: ToolRegistry,
    server: McpServer,
    schemas: Sequence[ToolSchema],
    prefix: str | None = None,
) -> None:
    for item in server.tools(schemas, prefix):
        if item.name in registry:
            raise BuildError(
                f"MCP server {server.name!r} offers a tool named {item.name!r}, but a tool of "
                "that name is registered already. Give the server a prefix "
                f"(mcp_server_...(..., prefix={server.name + '_'!r})) or rename the other tool."
            )
        registry.add(item)


def resolve_tools(
    local: ToolRegistry, servers: Sequence[McpServer], recorded: RunStarted | None = None
) -> tuple[ToolRegistry, tuple[McpServerSpec, ...]]:
    """The local tools plus each server's (listed now; from `recorded` for a server that
    cannot be reached, when given), and the servers as the run records them. A name that
    two tools would share is refused with a BuildError."""
    if not servers:
        return local, ()
    registry = ToolRegistry()
    for item in local:
        registry.add(item)
    specs = []
    for server in servers:
        try:
            schemas = server.list_tools()
        except McpServerUnavailable:
            fallback = None if recorded is None else _recorded(recorded, server)
            if recorded is None or fallback is None:
                raise
            schemas = _schemas(recorded, fallback)
        _add(registry, server, schemas)
        specs.append(server.spec.model_copy(update={"tools": tuple(s.name for s in schemas)}))
    return registry, tuple(specs)


def attached_tools(
    local: ToolRegistry, servers: Sequence[McpServer], definition: RunStarted | None
) -> ToolRegistry:
    """For a run continued from its log: the local tools plus the tools the run recorded for
    each declared server, called live when run; nothing is listed."""
    if not servers or definition is None:
        return local
    registry = ToolRegistry()
    for item in local:
        registry.add(item)
    for server in servers:
        spec = _recorded(definition, server)
        if spec is not None:  # called by their recorded names, whatever the prefix is now
            _add(registry, server, _schemas(definition, spec), spec.prefix)
    return registry
