"""`agentsm serve`: conversations with your agent over HTTP (the `ui` extra: FastAPI and
uvicorn). See `replay.serve`."""

from __future__ import annotations

import os

import click

from ..errors import UsageError
from ..render import printable
from .common import builder_option, common, db_path, example, get_builder

__all__ = ["serve_command"]


@click.command(
    name="serve",
    epilog=example(
        "agentsm serve --builder myagent:make_agent",
        "agentsm serve --builder myagent:make_agent --db postgresql://db/agents --port 8080",
    ),
)
@click.option("--host", default="127.0.0.1", show_default=True, help="the address to listen on")
@click.option("--port", type=int, default=8000, show_default=True, help="the port (0: any free)")
@builder_option
@common
def serve_command(host: str, port: int, builder: str | None) -> None:
    """Serve conversations with your agent over HTTP: start threads, post messages and read
    each turn as server-sent events, answer questions, decide approvals, steer and stop
    turns; every turn is recorded as `agentsm chat` records it. The API is described at
    /docs and /openapi.json."""
    try:
        from ..serve import LOOPBACK_HOSTS, Server, Service
        from ..uvicorn_thread import bind
    except ImportError as e:
        raise UsageError(
            f"agentsm serve needs FastAPI and uvicorn ({e.name} is missing): "
            "pip install 'agentsm[ui]'."
        ) from e
    make = get_builder(builder, required=True)
    assert make is not None
    try:
        bind(host, port).close()  # before the log is opened or created
    except OSError as e:
        raise UsageError(e.strerror or str(e)) from None
    service = Service(db_path(), make)
    try:
        server = Server(service, host, port)
        agent = builder or os.environ.get("AGENTSM_BUILDER", "")
        click.echo(
            f"agentsm serve: {printable(agent)} on {printable(db_path())} at {server.url}  "
            f"(the API: {server.url}/docs; Ctrl-C stops)"
        )
        if host not in LOOPBACK_HOSTS:
            click.echo(
                f"agentsm: warning: listening on {printable(host)}: anyone who can reach this "
                "machine can talk to your agent and read its conversations.",
                err=True,
            )
        server.run()
    finally:
        service.close()
