"""A provider stand-in on 127.0.0.1: serves scripted (recorded) HTTP responses, in order, to
whatever the SDK sends, and keeps every request for the test to inspect."""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "providers"
_HOP = {"content-length", "transfer-encoding", "content-encoding", "connection"}


def fixture(name: str) -> dict[str, Any]:
    """One recorded interaction, e.g. fixture("openai/01_text_nonstream")."""
    return json.loads((FIXTURES / f"{name}.json").read_text())  # type: ignore[no-any-return]


class LoopbackProvider:
    """Start with `with LoopbackProvider() as server:`; `server.url` is the base URL."""

    def __init__(self) -> None:
        self.responses: deque[tuple[int, dict[str, str], bytes]] = deque()
        self.requests: list[dict[str, Any]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                provider.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "json": json.loads(raw) if raw else None,
                    }
                )
                if not provider.responses:
                    status, headers, body = (
                        500,
                        {"content-type": "application/json"},
                        (b'{"error": {"message": "no scripted response left"}}'),
                    )
                else:
                    status, headers, body = provider.responses.popleft()
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("content-length", str(len(body)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve(
        self, status: int, body: str | dict[str, Any], headers: dict[str, str] | None = None
    ) -> LoopbackProvider:
        """Queue one response."""
        text = body if isinstance(body, str) else json.dumps(body)
        self.responses.append(
            (status, headers or {"content-type": "application/json"}, text.encode())
        )
        return self

    def serve_fixture(self, name: str) -> dict[str, Any]:
        """Queue a recorded response as it was recorded; returns the whole interaction."""
        item = fixture(name)
        response = item["response"]
        self.serve(response["status"], response["body"], dict(response["headers"]))
        return item

    def __enter__(self) -> LoopbackProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
