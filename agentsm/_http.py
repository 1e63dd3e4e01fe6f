"""One HTTP request through httpx, read up to a size limit: what the HTTP tools share.

A client is made for each request and closed with it, on the loop that runs the call, so no
connection outlives its call or stays bound to a loop that is gone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx

__all__ = ["HttpReply", "send"]

_TEXT_TYPES = ("json", "xml", "javascript", "yaml", "x-www-form-urlencoded", "csv", "html")


@dataclass(frozen=True)
class HttpReply:
    """A response as read: the status, the body's first bytes, whether more were left unread."""

    status: int
    reason: str
    content_type: str
    encoding: str
    body: bytes
    truncated: bool
    length: int | None
    """The length the server announced (content-length), if it did."""

    @property
    def status_line(self) -> str:
        """`HTTP 200 OK`."""
        return f"HTTP {self.status} {self.reason}".rstrip()

    @property
    def ok(self) -> bool:
        """A 2xx status."""
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        """The body as text in the response's encoding (undecodable bytes replaced)."""
        return self.body.decode(self.encoding, errors="replace")

    def shown(self) -> str:
        """The body as an LLM should read it: text as it is, binary content named, a note
        where the limit cut it."""
        media = self.content_type.split(";")[0].strip().lower()
        texty = not media or media.startswith("text/") or any(t in media for t in _TEXT_TYPES)
        if not texty:
            try:
                self.body.decode("utf-8")
            except UnicodeDecodeError:
                size = f"{self.length} bytes" if self.length is not None else "a body"
                return f"[{size} of {media}, not shown]"
        text = self.text
        if self.truncated:
            whole = f" of {self.length}" if self.length is not None else ""
            text += f"\n[... cut after {len(self.body)} bytes{whole}: the response size limit]"
        return text


async def send(
    method: str,
    url: str,
    *,
    params: Sequence[tuple[str, str]] | None = None,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    timeout: float = 30.0,
    max_bytes: int | None = None,
) -> HttpReply:
    """Make the request (redirects followed) and read at most `max_bytes` of the decoded body
    (None: all of it); httpx's errors go on to the caller."""
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=True) as client:
        request = client.build_request(
            method, url, params=list(params or ()), headers=dict(headers or {}), content=content
        )
        response = await client.send(request, stream=True)
        try:
            chunks: list[bytes] = []
            size, truncated = 0, False
            async for chunk in response.aiter_bytes():
                if max_bytes is not None and size + len(chunk) > max_bytes:
                    chunks.append(chunk[: max_bytes - size])
                    truncated = True
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            await response.aclose()
    announced = response.headers.get("content-length", "")
    if response.headers.get("content-encoding"):  # the length of the encoded body
        announced = ""
    return HttpReply(
        status=response.status_code,
        reason=response.reason_phrase,
        content_type=response.headers.get("content-type", ""),
        encoding=response.charset_encoding or "utf-8",
        body=b"".join(chunks),
        truncated=truncated,
        length=int(announced) if announced.isdigit() else None,
    )
