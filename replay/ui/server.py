"""Serving the viewer with uvicorn: in the foreground (`agentsm ui`) or in a thread (tests,
notebooks), on a port of its own choosing when asked for port 0."""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

__all__ = ["Server", "free_port", "listen_problem"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def listen_problem(host: str, port: int) -> str | None:
    """Why the viewer could not listen on `host:port` (the port in use, an address this machine
    does not have), tried by binding as uvicorn will; None when it could."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is in use; choose another with --port"
            return (
                f"cannot listen on {host} port {port} ({e.strerror or e}); check --host and --port"
            )
    return None


class Server:
    """uvicorn serving `app` on `host:port` (port 0: a free one), in a thread by `start()`
    until `stop()`, or in the foreground by `run()`."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port or free_port(host)
        config = uvicorn.Config(
            app,
            host=host,
            port=self.port,
            log_level="warning",
            timeout_graceful_shutdown=2,
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self, on_start: Callable[[], object] | None = None) -> None:
        """Serve until interrupted (Ctrl-C); `on_start()` is called (in another thread) once
        the port accepts connections."""
        if on_start is not None:
            threading.Thread(target=self._when_started, args=(on_start,), daemon=True).start()
        self._server.run()

    def _when_started(self, then: Callable[[], object]) -> None:
        while not self._server.started:
            if self._server.should_exit:
                return
            time.sleep(0.05)
        then()

    def start(self, timeout: float = 30.0) -> Server:
        """Serve in a thread; return once the port accepts connections."""
        self._thread = threading.Thread(target=self._server.run, name="agentsm-ui", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the viewer did not start on {self.url}; is the port free?")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread (open event streams are closed)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Server(url={self.url!r}, running={self._thread is not None})"
