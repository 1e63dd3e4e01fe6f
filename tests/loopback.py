"""A provider stand-in on 127.0.0.1: serves scripted (recorded) HTTP responses, in order, to
whatever the SDK sends, and keeps every request for the test to inspect.

Like every real provider it speaks HTTP/1.1 and keeps connections alive, so a client that
reuses a pooled connection bound to a dead event loop fails here as it would in production.
It can also misbehave on purpose: cut a response mid-body (a connection reset) or accept a
request and never answer.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "providers"
_HOP = {"content-length", "transfer-encoding", "content-encoding", "connection"}


def fixture(name: str) -> dict[str, Any]:
    """One recorded interaction, e.g. fixture("openai/01_text_nonstream")."""
    return json.loads((FIXTURES / f"{name}.json").read_text())  # type: ignore[no-any-return]


@dataclass
class Reply:
    """One scripted answer: a response, cut after `cut_after` body bytes (then the connection is
    reset), or none at all (`hang`: the request is read and never answered)."""

    status: int = 200
    headers: dict[str, str] | None = None
    body: bytes = b""
    cut_after: int | None = None
    hang: bool = False


class LoopbackProvider:
    """Start with `with LoopbackProvider() as server:`; `server.url` is the base URL."""

    def __init__(self) -> None:
        self.responses: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real providers do

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with provider._lock:
                    provider._sockets.add(self.connection)

            def finish(self) -> None:
                with provider._lock:
                    provider._sockets.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass  # the connection was reset on purpose

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                provider.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "json": json.loads(raw) if raw else None,
                        "port": self.client_address[1],
                    }
                )
                reply = provider.responses.popleft() if provider.responses else None
                if reply is None:
                    body = b'{"error": {"message": "no scripted response left"}}'
                    reply = Reply(500, {"content-type": "application/json"}, body)
                if reply.hang:
                    provider._stopping.wait()
                    self.close_connection = True
                    return
                self.send_response(reply.status)
                for key, value in (reply.headers or {}).items():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                if reply.cut_after is None:
                    self.wfile.write(reply.body)
                    return
                self.wfile.write(reply.body[: reply.cut_after])
                self.wfile.flush()
                # SO_LINGER 0: close() sends a TCP reset, as a dropped connection does
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = False  # server_close() joins every connection's thread
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve(
        self,
        status: int,
        body: str | bytes | dict[str, Any],
        headers: dict[str, str] | None = None,
        *,
        cut_after: int | None = None,
    ) -> LoopbackProvider:
        """Queue one response (cut, and the connection reset, after `cut_after` bytes)."""
        if not isinstance(body, bytes):
            body = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.responses.append(
            Reply(status, headers or {"content-type": "application/json"}, body, cut_after)
        )
        return self

    def serve_fixture(self, name: str, *, cut_after: int | None = None) -> dict[str, Any]:
        """Queue a recorded response as it was recorded; returns the whole interaction."""
        item = fixture(name)
        response = item["response"]
        body = response["body"]
        if response.get("body_encoding") == "base64":  # e.g. AWS event-stream bytes
            body = base64.b64decode(body)
        self.serve(response["status"], body, dict(response["headers"]), cut_after=cut_after)
        return item

    def hang(self) -> LoopbackProvider:
        """Queue a request that is read and never answered (until the server stops)."""
        self.responses.append(Reply(hang=True))
        return self

    def __enter__(self) -> LoopbackProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        with self._lock:
            live = list(self._sockets)
        for sock in live:  # idle keep-alive connections: end them so their threads finish
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()
        self._thread.join()
