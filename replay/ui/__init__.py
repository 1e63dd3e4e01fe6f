"""`agentsm ui`: recorded runs in the browser. A FastAPI app (the `ui` extra) with a JSON API
under /api/ and a page of plain HTML, JavaScript and CSS shipped in the package."""

from .app import LOOPBACK_HOSTS, Viewer, create_app
from .server import Server

__all__ = ["LOOPBACK_HOSTS", "Server", "Viewer", "create_app"]
