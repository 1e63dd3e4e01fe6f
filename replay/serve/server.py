"""Serving the conversations with uvicorn: in the foreground (`agentsm serve`) or in a thread
(tests, notebooks, your own program), on a socket bound before anything is served (port 0:
one the system picks, with no race for it). When it stops, the turns under way are stopped
first (each recorded so, resumable) and their streams end with `stopped` and `end`."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import uvicorn

from ..uvicorn_thread import Served, bind
from .app import LOOPBACK_HOSTS, create_app
from .service import Service

__all__ = ["Server", "bind"]


class _Uvicorn(uvicorn.Server):
    """uvicorn, stopping the service's turns under way before it closes the connections, so
    that their streams end whole."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.service.stop_drives()
        await super().shutdown(sockets=sockets)


class Server(Served):
    """`service`'s conversations served by uvicorn on `host:port` (port 0: a free one): in a
    thread by `start()` until `stop()` (or as a context manager), or in the foreground by
    `run()` until interrupted. Requests naming another host than `hosts` are refused (by
    default the loopback names when `host` is a loopback address, else any)."""

    what = "agentsm serve"

    def __init__(
        self,
        service: Service,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        hosts: Sequence[str] | None = None,
    ) -> None:
        self.service = service
        sock = bind(host, port)
        if hosts is None:
            hosts = LOOPBACK_HOSTS if host in LOOPBACK_HOSTS else ["*"]
        config = uvicorn.Config(
            create_app(service, hosts=hosts),
            log_level="warning",
            timeout_graceful_shutdown=5,
            lifespan="off",
        )
        super().__init__(_Uvicorn(config, service), sock, host)
