"""Serving the conversations with uvicorn: in the foreground (`agentsm serve`) or in a thread
(tests, notebooks, your own program), on a socket bound before anything is served (port 0:
one the system picks, with no race for it). When it stops, the turns under way are stopped
first (each recorded so, resumable) and their streams end with `stopped` and `end`."""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Sequence

import uvicorn

from .app import LOOPBACK_HOSTS, create_app
from .service import Service

__all__ = ["Server", "bind"]


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` (port 0: a free one), as uvicorn would bind it; an
    `OSError` saying what to change when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP named: asyncio
    # then turns Nagle's algorithm off on each connection (else small writes wait ~40 ms)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise OSError(
                e.errno, f"port {port} on {host} is in use; choose another with --port"
            ) from e
        raise OSError(
            e.errno,
            f"cannot listen on {host} port {port} ({e.strerror or e}); check --host and --port",
        ) from e
    return sock


class _Uvicorn(uvicorn.Server):
    """uvicorn, stopping the service's turns under way before it closes the connections, so
    that their streams end whole."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.service.stop_drives()
        await super().shutdown(sockets=sockets)


class Server:
    """`service`'s conversations served by uvicorn on `host:port` (port 0: a free one): in a
    thread by `start()` until `stop()` (or as a context manager), or in the foreground by
    `run()` until interrupted. Requests naming another host than `hosts` are refused (by
    default the loopback names when `host` is a loopback address, else any)."""

    def __init__(
        self,
        service: Service,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        hosts: Sequence[str] | None = None,
    ) -> None:
        self.service = service
        self.host = host
        self._socket = bind(host, port)
        self.port = int(self._socket.getsockname()[1])
        if hosts is None:
            hosts = LOOPBACK_HOSTS if host in LOOPBACK_HOSTS else ["*"]
        config = uvicorn.Config(
            create_app(service, hosts=hosts),
            log_level="warning",
            timeout_graceful_shutdown=5,
            lifespan="off",
        )
        self._server = _Uvicorn(config, service)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Where it serves, e.g. http://127.0.0.1:8000."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C, SIGTERM)."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def start(self, timeout: float = 30.0) -> Server:
        """Serve in a thread; return once connections are accepted."""
        self._thread = threading.Thread(target=self.run, name="agentsm-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"agentsm serve did not start on {self.url}.")
            pause.wait(0.01)
        return self

    def stop(self) -> None:
        """Stop serving (the turns under way are stopped first) and wait for the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Server(url={self.url!r}, running={self._thread is not None})"
