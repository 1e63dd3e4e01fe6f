"""`agentsm copy`: move runs between logs and backends (a click command of the `agentsm` group)."""

from __future__ import annotations

from contextlib import ExitStack, closing

import click

from agentsm import AgentError
from eventstore import StoreError, open_store

from ..copying import copy_runs
from .common import common, db_path, example

__all__ = ["copy_command"]


@click.command(
    "copy",
    epilog=example(
        "agentsm copy --from runs.db --to postgresql://me@db.internal/agents",
        "agentsm copy --to backup.db 3f2a 9c1e",
    ),
)
@click.option(
    "--from",
    "source",
    metavar="PATH_OR_URL",
    help="the log to copy from (default: --db, $AGENTSM_DB, else ./agentsm.db)",
)
@click.option(
    "--to",
    "dest",
    required=True,
    metavar="PATH_OR_URL",
    help="the log to copy into, created if new (a SQLite path, sqlite:///..., postgresql://...)",
)
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@common
def copy_command(source: str | None, dest: str, runs: tuple[str, ...]) -> None:
    """Copy runs (ids or unique prefixes; every run when none is named) from one log into
    another, on the same backend or another, with their hash chains, parent links and catalog
    entries. Runs the destination holds already, the same, are left as they are."""
    source = source or db_path()
    try:
        with ExitStack() as stack:
            src = stack.enter_context(closing(open_store(source, read_only=True, create=False)))
            dst = stack.enter_context(closing(open_store(dest)))
            report = copy_runs(src, dst, runs or None)
    except (StoreError, AgentError) as e:
        raise click.ClickException(str(e)) from e
    for run_id in report.copied:
        click.echo(f"copied {run_id}")
    for run_id in report.present:
        click.echo(f"already there {run_id}")
    click.echo(str(report))
