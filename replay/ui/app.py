"""The web viewer's ASGI app: the JSON API under /api/, the page and its static files, and
the safety defaults (loopback hosts only, no writes unless allowed, a strict content policy)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from agentsm import AgentError
from eventstore import EventStore, StoreError, UnknownRun

from ..errors import UnknownThread
from ..source import Builder, open_store
from . import actions, api, live

__all__ = ["LOOPBACK_HOSTS", "Viewer", "create_app"]

STATIC = Path(__file__).parent / "static"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


@dataclass
class Viewer:
    """What the app serves: the log (`db`, a path or URL the CLI takes), opened read-only for
    reading; whether writes are allowed; the user's agent, to let decided runs go on."""

    db: str
    allow_write: bool = False
    builder: Builder | None = None
    builder_spec: str | None = None
    _store: EventStore | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    running: dict[str, threading.Thread] = field(default_factory=dict, repr=False)

    @property
    def store(self) -> EventStore:
        """The log, opened read-only once (the store is safe to share between threads)."""
        with self._lock:
            if self._store is None:
                self._store = open_store(self.db, read_only=True)
            return self._store

    def close(self) -> None:
        """Close the read-only store (threads still resuming runs keep their own)."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def create_app(viewer: Viewer, *, hosts: Sequence[str] = LOOPBACK_HOSTS) -> FastAPI:
    """The app serving `viewer`'s log; requests naming another host than `hosts` are refused
    (a web page elsewhere cannot reach the log through a name it points at 127.0.0.1)."""
    app = FastAPI(
        title="agentsm viewer",
        summary="Recorded agent runs: the catalog, facts, memory at any seq, lineage, diffs.",
        version="1",
        docs_url="/api/docs",
        redoc_url=None,
    )
    app.state.viewer = viewer
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))

    @app.middleware("http")
    async def policy(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    @app.exception_handler(UnknownRun)
    async def unknown(request: Request, error: UnknownRun) -> JSONResponse:
        return JSONResponse({"detail": _one_line(error)}, status_code=404)

    @app.exception_handler(UnknownThread)
    async def unknown_thread(request: Request, error: UnknownThread) -> JSONResponse:
        return JSONResponse({"detail": _one_line(error)}, status_code=404)

    @app.exception_handler(StoreError)
    async def store_error(request: Request, error: StoreError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(error)}, status_code=409)

    @app.exception_handler(AgentError)
    async def agent_error(request: Request, error: AgentError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(error)}, status_code=400)

    @app.exception_handler(ValueError)
    async def value_error(request: Request, error: ValueError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(error)}, status_code=400)

    app.include_router(api.router)
    app.include_router(live.router)
    app.include_router(actions.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    return app
