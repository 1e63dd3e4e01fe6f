"""Serving the viewer with uvicorn: in the foreground (`agentsm ui`) or in a thread (tests,
notebooks), on a port of its own choosing when asked for port 0."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from ..uvicorn_thread import Served, bind

__all__ = ["Server"]


class Server(Served):
    """uvicorn serving `app` on `host:port` (port 0: a free one), in a thread by `start()`
    until `stop()`, or in the foreground by `run()`. An `OSError` says what to change when it
    cannot listen there (the port in use, an address this machine does not have)."""

    what = "the viewer"

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        sock = bind(host, port)
        config = uvicorn.Config(
            app, log_level="warning", timeout_graceful_shutdown=2, lifespan="off"
        )
        super().__init__(uvicorn.Server(config), sock, host)
