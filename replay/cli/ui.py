"""`agentsm ui`: the web viewer of a log (the `ui` extra: FastAPI and uvicorn)."""

from __future__ import annotations

import webbrowser

import click

from ..errors import UsageError
from ..render import printable
from .common import builder_option, common, db_path, example, get_builder

__all__ = ["ui_command"]


@click.command(
    name="ui",
    epilog=example(
        "agentsm ui",
        "agentsm ui --db runs.db --port 8765 --no-open",
        "agentsm ui --allow-write --builder myagent:make_agent",
    ),
)
@click.option("--host", default="127.0.0.1", show_default=True, help="the address to listen on")
@click.option("--port", type=int, default=8765, show_default=True, help="the port (0: any free)")
@click.option(
    "--allow-write",
    is_flag=True,
    help="let the page approve, reject, modify and branch runs (read-only otherwise)",
)
@click.option("--no-open", is_flag=True, help="do not open a browser tab")
@builder_option
@common
def ui_command(host: str, port: int, allow_write: bool, no_open: bool, builder: str | None) -> None:
    """Serve recorded runs in the browser: the catalog, each run's diagram, timeline, facts and
    memory at any fact, branch families and diffs, live runs; a JSON API under /api/. With
    --builder (and --allow-write), a run approved from the page goes on there."""
    try:
        from ..ui import LOOPBACK_HOSTS, Server, Viewer, create_app
    except ImportError as e:
        raise UsageError(
            f"agentsm ui needs the web viewer's packages ({e.name} is missing): "
            "pip install 'agentsm[ui]'."
        ) from e
    make = get_builder(builder)
    viewer = Viewer(db_path(), allow_write=allow_write, builder=make, builder_spec=builder)
    viewer.store  # noqa: B018 - open the log now: a bad --db is one line, before serving
    hosts = ["*"] if host not in LOOPBACK_HOSTS else list(LOOPBACK_HOSTS)
    try:  # bound before saying where it serves
        server = Server(create_app(viewer, hosts=hosts), host=host, port=port)
    except OSError as e:
        viewer.close()
        raise UsageError(e.strerror or str(e)) from None
    mode = "read-write" if allow_write else "read-only"
    click.echo(f"agentsm ui: {printable(db_path())} ({mode}) on {server.url}  (Ctrl-C stops)")
    if host not in LOOPBACK_HOSTS:
        click.echo(
            f"agentsm: warning: listening on {printable(host)}: anyone who can reach this "
            "machine can read the log.",
            err=True,
        )
    try:
        server.run(on_start=None if no_open else lambda: webbrowser.open(server.url))
    finally:
        viewer.close()
