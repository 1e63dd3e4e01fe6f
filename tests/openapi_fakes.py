"""APIs on 127.0.0.1 for the OpenAPI tools: a faithful Swagger Petstore (v3, as
petstore3.swagger.io answers: JSON when asked for it, XML otherwise, its messages and statuses)
and a recorder that answers what a test scripts. Both keep every request they get.

Like real servers they speak HTTP/1.1 with keep-alive.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Request:
    """What a server got: method, path (decoded query apart), headers (lower-case names)."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def form(self) -> list[tuple[str, str]]:
        return parse_qsl(self.body.decode())


@dataclass
class Response:
    status: int = 200
    body: bytes | str | Any = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False


class Loopback:
    """A server whose answers come from `respond(request)`; `with Loopback(fn) as s:`."""

    def __init__(self, respond: Callable[[Request], Response]) -> None:
        self.requests: list[Request] = []
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._sockets.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._sockets.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _any(self) -> None:
                length = int(self.headers.get("content-length", 0))
                parts = urlsplit(self.path)
                request = Request(
                    self.command,
                    parts.path,
                    parse_qsl(parts.query, keep_blank_values=True),
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                server.requests.append(request)
                reply = respond(request)
                if reply.hang:
                    server._stopping.wait()
                    self.close_connection = True
                    return
                body = reply.body
                headers = dict(reply.headers)
                if not isinstance(body, bytes | str):
                    body = json.dumps(body)
                    headers.setdefault("content-type", "application/json")
                data = body.encode() if isinstance(body, str) else body
                self.send_response(reply.status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Loopback:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        with self._lock:
            live = list(self._sockets)
        for sock in live:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()
        self._thread.join()


def _xml(name: str, value: Any) -> str:
    if isinstance(value, dict):
        inner = "".join(_xml(k, v) for k, v in value.items())
    elif isinstance(value, list):
        inner = "".join(_xml(name.rstrip("s"), v) for v in value)
    else:
        inner = str(value).lower() if isinstance(value, bool) else str(value)
    return f"<{name}>{inner}</{name}>"


STATUSES = ("available", "pending", "sold")


class Petstore:
    """The Swagger Petstore v3 under `/api/v3`, seeded as the public one is (pets 1 to 10),
    answering as it does. `api_key`: the key `GET /store/inventory` requires (the public
    server wants none; this one checks what the tool sent)."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        kinds = [("Cats", "Cat"), ("Dogs", "Dog"), ("Lions", "Lion"), ("Rabbits", "Rabbit")]
        self.pets: dict[int, dict[str, Any]] = {}
        for n in range(1, 11):
            category, kind = kinds[(n - 1) % 4]
            self.pets[n] = {
                "id": n,
                "category": {"id": (n - 1) % 4 + 1, "name": category},
                "name": f"{kind} {(n - 1) // 4 + 1}",
                "photoUrls": ["url1", "url2"],
                "tags": [{"id": 1, "name": "tag1"}, {"id": 2, "name": "tag2"}],
                "status": STATUSES[n % 3],
            }
        self.orders: dict[int, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}

    def __call__(self, request: Request) -> Response:
        if not request.path.startswith("/api/v3/"):
            return Response(404, "Not Found", {"content-type": "text/plain"})
        path = request.path[len("/api/v3") :]
        wants_json = "json" in request.headers.get("accept", "")
        try:
            status, value = self._route(request, path)
        except (ValueError, KeyError, TypeError) as e:
            status, value = 400, {"code": 400, "message": f"Input error: {e}"}
        if isinstance(value, str) and status != 200:
            return Response(status, value, {"content-type": "text/plain"})
        if wants_json or isinstance(value, str):
            return Response(status, value if not isinstance(value, str) else json.dumps(value))
        return Response(status, _xml("pet", value), {"content-type": "application/xml"})

    def _body(self, request: Request) -> dict[str, Any]:
        kind = request.headers.get("content-type", "")
        if "json" in kind:
            data = request.json
            if not isinstance(data, dict):
                raise ValueError("the body is not an object")
            return data
        raise ValueError(f"unsupported content type {kind!r}")

    def _route(self, request: Request, path: str) -> tuple[int, Any]:
        method, query = request.method, dict(request.query)
        if path == "/pet" and method in ("POST", "PUT"):
            pet = self._body(request)
            if "name" not in pet or "photoUrls" not in pet:
                return 422, "Validation exception"
            if method == "PUT" and pet.get("id") not in self.pets:
                return 404, "Pet not found"
            pet.setdefault("id", max(self.pets, default=0) + 1)
            self.pets[int(pet["id"])] = pet
            return 200, pet
        if path == "/pet/findByStatus" and method == "GET":
            status = query.get("status", "available")
            if status not in STATUSES:
                return 400, {
                    "code": 400,
                    "message": f"Input error: query parameter `status value `{status}` is not "
                    "in the allowable values `[available, pending, sold]`",
                }
            return 200, [p for p in self.pets.values() if p.get("status") == status]
        if path == "/pet/findByTags" and method == "GET":
            tags = {v for k, v in request.query if k == "tags"}
            return 200, [
                p for p in self.pets.values() if tags & {t["name"] for t in p.get("tags", [])}
            ]
        found = re.fullmatch(r"/pet/([^/]+)(/uploadImage)?", path)
        if found:
            pet_id = int(found.group(1))
            if found.group(2):
                if pet_id not in self.pets:
                    return 404, "Pet not found"
                size = len(request.body)
                meta = query.get("additionalMetadata", "")
                return 200, {"code": 200, "type": "unknown", "message": f"{meta}{size} bytes"}
            if pet_id not in self.pets:
                return 404, "Pet not found"
            if method == "GET":
                return 200, self.pets[pet_id]
            if method == "DELETE":
                del self.pets[pet_id]
                return 200, "Pet deleted"
            if method == "POST":
                for key in ("name", "status"):
                    if key in query:
                        self.pets[pet_id][key] = query[key]
                return 200, self.pets[pet_id]
        if path == "/store/inventory" and method == "GET":
            if request.headers.get("api_key") != self.api_key:
                return 401, {"code": 401, "message": "a valid api_key header is required"}
            counts: dict[str, int] = {}
            for pet in self.pets.values():
                counts[pet.get("status", "")] = counts.get(pet.get("status", ""), 0) + 1
            return 200, counts
        if path == "/store/order" and method == "POST":
            order = self._body(request)
            order.setdefault("id", len(self.orders) + 1)
            self.orders[int(order["id"])] = order
            return 200, order
        found = re.fullmatch(r"/store/order/([^/]+)", path)
        if found:
            order_id = int(found.group(1))
            if order_id not in self.orders:
                return 404, "Order not found"
            if method == "DELETE":
                del self.orders[order_id]
                return 200, "order deleted"
            return 200, self.orders[order_id]
        if path == "/user" and method == "POST":
            user = self._body(request)
            self.users[str(user["username"])] = user
            return 200, user
        if path == "/user/login" and method == "GET":
            return 200, f"Logged in user session: {query.get('username', '')}"
        if path == "/user/logout" and method == "GET":
            return 200, "User logged out"
        found = re.fullmatch(r"/user/([^/]+)", path)
        if found:
            name = found.group(1)
            if name not in self.users:
                return 404, "User not found"
            if method == "DELETE":
                del self.users[name]
                return 200, "User deleted"
            return 200, self.users[name]
        return 404, "Not Found"
