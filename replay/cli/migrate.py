"""`agentsm migrate`: bring a log written in format 1 to log format 2, backed up first."""

from __future__ import annotations

import time
from pathlib import Path

import click

from agentsm.text import printable
from eventstore import SQLiteEventStore
from eventstore.pg_url import is_postgres_url

from ..errors import UsageError
from .common import common, db_path, example, plural

__all__ = ["migrate_command"]


@click.command(
    "migrate",
    epilog=example("agentsm migrate --db runs.db", "agentsm migrate --backup before.db"),
)
@click.option(
    "--backup",
    "backup_to",
    metavar="FILE",
    help="the copy made first (default: the log's name with .format1-TIME.db)",
)
@common
def migrate_command(backup_to: str | None) -> None:
    """Bring a log of format 1 (one row per fact, as releases up to 0.3 write it) to log
    format 2 (facts packed into few, narrow rows): a copy is made first, then the log is
    converted in one transaction, every run's hash chain checked, and the file compacted.
    Every fact, hash and run stays as it was; a log is never converted unless asked, nor one
    whose chains do not verify. Stop the processes that have the log open first (workers, the
    viewer, agentsm serve): they read it as format 1 until they are started again."""
    path = db_path()
    if is_postgres_url(path):
        raise UsageError(
            "Logs on PostgreSQL keep one row per fact (format 1); there is nothing to migrate."
        )
    if not Path(path).exists():
        raise UsageError(f"No log at {printable(path)}: check --db or $AGENTSM_DB.")
    with SQLiteEventStore(path, read_only=True) as reader:  # the file as it is, unmigrated
        if reader.log_format == 2:
            click.echo(f"{printable(path)} is in log format 2 already; nothing to do.")
            return
        runs = [r.run_id for r in reader.runs()]
        broken = [report for run in runs if not (report := reader.verify(run)).ok]
        if broken:  # converted, it would be a broken log with newer rows: say so, touch nothing
            raise UsageError(
                f"{plural(len(broken), 'run')} of {printable(path)} do not verify (first: "
                f"{broken[0]}); nothing was converted. Restore the log from a backup, or copy "
                "its intact runs into a new log (agentsm copy), then migrate that."
            )
        copy = Path(backup_to or f"{path}.format1-{time.strftime('%Y%m%d-%H%M%S')}.db")
        reader.backup(copy)
    click.echo(f"backed up {printable(path)} to {printable(str(copy))}")
    before = Path(path).stat().st_size
    with SQLiteEventStore(path, create=False) as store:
        store.upgrade()
        broken = [report for run in runs if not (report := store.verify(run)).ok]
        if broken:  # cannot happen to an intact log: say so, keep the copy
            raise UsageError(
                f"{plural(len(broken), 'run')} did not verify after the migration "
                f"(first: {broken[0]}); the log as it was is in {printable(str(copy))}."
            )
        click.echo(
            f"converted {printable(path)}: {plural(len(runs), 'run')}, every hash chain intact"
        )
        store.compact()
    after = Path(path).stat().st_size
    click.echo(f"migrated {printable(path)} to log format 2; {before:,} -> {after:,} bytes")
