"""`agentsm migrate`: bring a log written in format 1 to log format 2, backed up first; on a log
in format 2 already, finish a migration that was cut short (check the chains, compact)."""

from __future__ import annotations

import sqlite3
import time
import urllib.parse
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import click

from agentsm.text import plural, printable
from eventstore import ChainReport, Driver, RunInUse, RunRecord, SQLiteEventStore, StoreError
from eventstore.driver import refuse_live_driver
from eventstore.pg_url import is_postgres_url

from ..errors import UsageError
from .common import common, db_path, example

__all__ = ["migrate_command"]

FORCE_HELP = (
    "go on although processes drive runs of the log: those processes must be restarted "
    "afterwards; their runs can be resumed"
)


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
@click.option("--force", is_flag=True, help=FORCE_HELP)
@common
def migrate_command(backup_to: str | None, force: bool) -> None:
    """Bring a log of format 1 (one row per fact, as releases up to 0.3 write it) to log
    format 2 (facts packed into few, narrow rows): a read-only copy is made first, then the log
    is converted in one transaction, every run's hash chain checked, and the file compacted.
    Every fact, hash and run stays as it was; a log is never converted unless asked, nor one
    whose chains do not verify, nor one whose runs live processes drive (stop them, or let
    their runs finish; --force goes on anyway). Run again on a log in format 2, it finishes a
    migration that was cut short: every chain checked, the file compacted."""
    path = db_path()
    if is_postgres_url(path):
        click.echo(
            "Logs on PostgreSQL keep one row per fact (format 1), which is how they stay; "
            "there is nothing to migrate."
        )
        return
    if not Path(path).exists():
        raise UsageError(f"No log at {printable(path)}: check --db or $AGENTSM_DB.")
    with SQLiteEventStore(path, read_only=True) as reader:  # the file as it is, unmigrated
        if reader.log_format == 2:
            _finish(reader, force)
            return
        runs = reader.runs()
        harm = "migrating it now would make their next write fail"
        _refuse_live_drivers(path, runs, force, harm)
        copy = Path(backup_to or f"{path}.format1-{time.strftime('%Y%m%d-%H%M%S')}.db")
        if copy.exists():
            raise UsageError(
                f"{printable(str(copy))} exists already; nothing was converted. Name a new file "
                "for the copy (--backup FILE)."
            )
        _refuse_broken(reader, runs, "nothing was converted")
        _back_up(reader, copy)
        if not force:  # a process may have taken a run while the copy was made
            try:
                _refuse_live_drivers(path, reader.runs(), force, harm)
            except UsageError:
                copy.unlink(missing_ok=True)  # nothing converted: the copy is not needed
                raise
    click.echo(f"backed up {printable(path)} to {printable(str(copy))} (read-only)")
    before = Path(path).stat().st_size
    with SQLiteEventStore(path, create=False) as store:
        store.upgrade()
        broken = _broken(store, runs)
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
    click.echo(f"migrated {printable(path)} to log format 2; {_size(before)} -> {_size(after)}")


def _finish(reader: SQLiteEventStore, force: bool) -> None:
    """A log in format 2 already: when its file has free pages (a migration whose compaction
    or last check was cut short), check every chain and compact it; else say there is
    nothing to do (at once)."""
    path = reader.path
    if not _free_pages(path):
        click.echo(f"{printable(path)} is already in log format 2, compacted; nothing to do.")
        return
    runs = reader.runs()
    _refuse_live_drivers(
        path, runs, force, "compacting it now would hold their writes up until it is done"
    )
    _refuse_broken(reader, runs, "the log was not compacted")
    before = Path(path).stat().st_size
    with SQLiteEventStore(path, create=False) as store:
        store.compact()
    after = Path(path).stat().st_size  # once closed: the WAL is checkpointed into the file
    click.echo(
        f"{printable(path)} is already in log format 2; every hash chain intact "
        f"({plural(len(runs), 'run')}); compacted from {_size(before)} to {_size(after)}"
    )


def _live_drivers(runs: Sequence[RunRecord]) -> list[tuple[str, Driver]]:
    """The runs held by a driver that may be alive, as `claim` tells it (same host: its pid
    runs with the same start time; another host: its lease has not run out), each with its
    driver."""
    now = time.time()
    held: list[tuple[str, Driver]] = []
    for run in runs:
        driver = run.driver
        if driver is None:  # nobody drives it (a driver column is set only with its token)
            continue
        row = ("held", driver.host, driver.pid, driver.started, run.lease_until)
        try:
            refuse_live_driver(run.run_id, row, None, force=False, now=now)
        except RunInUse:
            held.append((run.run_id, driver))
    return held


def _refuse_live_drivers(path: str, runs: Sequence[RunRecord], force: bool, harm: str) -> None:
    """Refuse (nothing written) when live processes drive runs of the log, naming a few runs
    and their processes; with `force`, say what the user must do afterwards and go on."""
    held = _live_drivers(runs)
    if not held:
        return
    ids = [printable(run_id) for run_id, _ in held[:3]]
    more = f" and {len(held) - 3} more" if len(held) > 3 else ""
    drivers = list(dict.fromkeys(str(driver) for _, driver in held))
    by = ", ".join(drivers[:3]) + (f" and {len(drivers) - 3} more" if len(drivers) > 3 else "")
    which = (
        f"{plural(len(held), 'run')} of {printable(path)} "
        f"{'is' if len(held) == 1 else 'are'} driven by a live process "
        f"({', '.join(ids)}{more}; by {printable(by)})"
    )
    if force:
        click.echo(
            f"going on (--force) although {which}: restart those processes afterwards; "
            "their runs can be resumed."
        )
        return
    raise UsageError(
        f"{which}: {harm}. Nothing was written. Stop those processes (or let their runs "
        "finish) and run agentsm migrate again; or go on anyway with --force, then restart "
        "those processes (their runs can be resumed)."
    )


def _broken(store: SQLiteEventStore, runs: Sequence[RunRecord]) -> list[ChainReport]:
    """The chain reports of the runs that do not verify."""
    return [report for run in runs if not (report := store.verify(run.run_id)).ok]


def _refuse_broken(store: SQLiteEventStore, runs: Sequence[RunRecord], untouched: str) -> None:
    """Refuse a log a run of which does not verify: say so, touch nothing."""
    broken = _broken(store, runs)
    if broken:
        raise UsageError(
            f"{plural(len(broken), 'run')} of {printable(store.path)} do not verify (first: "
            f"{broken[0]}); {untouched}. Restore the log from a backup, or copy its intact runs "
            "into a new log (agentsm copy), then migrate that."
        )


def _back_up(reader: SQLiteEventStore, copy: Path) -> None:
    """Copy the log into `copy`, read-only (named so only once complete: see `backup`)."""
    try:
        reader.backup(copy, read_only=True)
    except StoreError as e:
        raise UsageError(f"{e} Nothing was converted.") from None


def _free_pages(path: str) -> int:
    """How many pages of the file are free (`PRAGMA freelist_count`): a migration whose
    compaction did not finish leaves format 1's pages free."""
    uri = f"file:{urllib.parse.quote(str(Path(path).resolve()))}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            return int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    except sqlite3.Error:  # unreadable this way (a folder one may only read): nothing to do
        return 0


def _size(n: int) -> str:
    """A file's size for people: kB below a megabyte, else MB."""
    return f"{n / 1e3:,.0f} kB" if n < 1e6 else f"{n / 1e6:,.1f} MB"
