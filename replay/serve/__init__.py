"""`agentsm serve`: conversations with your agent over HTTP. A FastAPI app (the `ui` extra)
whose threads are recorded in the log as `Thread.send` records them, each turn streamed as
server-sent events; questions, approvals, steering and stops go through the functions the
command line uses."""

from .app import LOOPBACK_HOSTS, create_app
from .drives import Drive
from .server import Server
from .service import Refused, Service, ThreadNotFound

__all__ = [
    "LOOPBACK_HOSTS",
    "Drive",
    "Refused",
    "Server",
    "Service",
    "ThreadNotFound",
    "create_app",
]
