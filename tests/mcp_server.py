"""A small MCP server for the tests, written with the SDK's server API (mcp 2.x or 1.x).

python tests/mcp_server.py                 serve over stdio
python tests/mcp_server.py --http          serve streamable HTTP on 127.0.0.1, on a free port
                                           (printed as the first line of stdout, once the
                                           socket listens)
python tests/mcp_server.py --changed       offer another tool list (`add` described anew,
                                           `multiply` added); so does the environment
                                           variable AGENTSM_MCP_VARIANT=changed
python tests/mcp_server.py --crash         exit at once (a server that fails to start)

AGENTSM_MCP_VARIANT=images adds a `screenshot` tool that returns text and a PNG image.
"""

from __future__ import annotations

import os
import socket
import sys

import anyio
import uvicorn

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x: the same server API under its former name
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

CHANGED = "--changed" in sys.argv or os.environ.get("AGENTSM_MCP_VARIANT") == "changed"

server: MCPServer = MCPServer("agentsm-test", log_level="WARNING")
_calls = {"count": 0}


@server.tool(description="Add two integers (exactly)." if CHANGED else "Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")
    return a / b


@server.tool()
def count() -> int:
    """How many times this tool was called in this server process (state kept by the server)."""
    _calls["count"] += 1
    return _calls["count"]


@server.tool()
def pid() -> int:
    """The server process's id."""
    return os.getpid()


@server.tool()
async def wait(seconds: float) -> str:
    """Wait, then say so."""
    await anyio.sleep(seconds)
    return "waited"


@server.tool()
def crash() -> str:
    """End the server process at once, in the middle of the call."""
    os._exit(3)


if CHANGED:

    @server.tool()
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b


if os.environ.get("AGENTSM_MCP_VARIANT") == "images":
    try:  # mcp 2.x
        from mcp.server.mcpserver import Image
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import Image  # type: ignore[no-redef,attr-defined]

    @server.tool(structured_output=False)
    def screenshot() -> list[str | Image]:
        """What the screen shows: a caption, then the picture (a 1x1 red PNG)."""
        return ["The screen:", Image(data=bytes.fromhex(RED_PNG), format="png")]


RED_PNG = (
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f00050001ff56c72f0d0000000049454e44ae426082"
)
"""A 1x1 red PNG, as hex (the `screenshot` tool's picture)."""


async def _serve_http() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)  # listening: connections queue from now on
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    if "--crash" in sys.argv:
        sys.exit("mcp_server: asked to crash")
    if "--http" in sys.argv:
        anyio.run(_serve_http)
    else:
        server.run("stdio")
