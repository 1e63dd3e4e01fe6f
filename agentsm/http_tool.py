"""`http_request`, a tool that makes one HTTP request with httpx. Its result is recorded like
any tool's (an observation in `ToolExecuted`), so replay, branch and resume serve the recorded
response and never call the server again.

    from agentsm.http_tool import http_request
    agent = AgentBuilder("Is example.com up?").tool(http_request)
"""

from __future__ import annotations

from ._http import send
from .tools import tool

__all__ = ["BODY_LIMIT", "http_request"]

BODY_LIMIT = 20_000
"""How many characters of a response body the observation keeps (the LLM reads all of it)."""


@tool(timeout=60.0)
async def http_request(method: str, url: str, body: str = "", content_type: str = "") -> str:
    """Make an HTTP request (GET, POST, ...) and return the status line, then the response body
    (at most 20,000 characters). A 4xx or 5xx status is a result, not a failure; a network
    error (no such host, refused, timed out) fails the call with its reason."""
    headers = {"content-type": content_type} if content_type else {}
    reply = await send(
        method.upper(), url, content=body.encode() if body else None, headers=headers
    )
    text = reply.text
    cut = f"\n[... {len(text) - BODY_LIMIT} more characters]" if len(text) > BODY_LIMIT else ""
    return f"{reply.status_line}\n{text[:BODY_LIMIT]}{cut}"
