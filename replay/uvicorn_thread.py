"""uvicorn on a socket bound before anything is served (port 0: one the system picks, with no
race for it), in the foreground or in a thread: what the viewer (`agentsm ui`) and the HTTP
API (`agentsm serve`) both run on."""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable

import uvicorn

__all__ = ["Served", "bind"]


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


class Served:
    """`server` (uvicorn) serving on `sock`, bound to `host`: in a thread by `start()` until
    `stop()` (or as a context manager), or in the foreground by `run()` until interrupted."""

    what = "the server"
    """How errors name it ("the viewer", "agentsm serve")."""

    def __init__(self, server: uvicorn.Server, sock: socket.socket, host: str) -> None:
        self.host = host
        self._server = server
        self._socket = sock
        self.port = int(sock.getsockname()[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Where it serves, e.g. http://127.0.0.1:8000."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self, on_start: Callable[[], object] | None = None) -> None:
        """Serve until interrupted (Ctrl-C, SIGTERM); `on_start()` is called (in another
        thread) once connections are accepted."""
        if on_start is not None:
            threading.Thread(target=self._when_started, args=(on_start,), daemon=True).start()
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._socket.close()

    def _when_started(self, then: Callable[[], object]) -> None:
        while not self._server.started:
            if self._server.should_exit:
                return
            time.sleep(0.05)
        then()

    def start(self, timeout: float = 30.0) -> Served:
        """Serve in a thread; return once connections are accepted."""
        self._thread = threading.Thread(target=self.run, name="agentsm-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        pause = threading.Event()
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.what} did not start on {self.url}.")
            pause.wait(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread (open event streams are closed)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def __enter__(self) -> Served:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, running={self._thread is not None})"
