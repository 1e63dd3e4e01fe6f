"""`python -m replay.torture`: one trial from the command line; its timeline, figures and
violations printed, exit status 1 on any violation."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import click

from .options import POSTGRES_URL, Options
from .trial import torture


@click.command()
@click.option(
    "--db", type=click.Choice(["sqlite", "postgres"]), default="sqlite", show_default=True
)
@click.option("--runs", default=20, show_default=True, help="runs submitted")
@click.option("--workers", default=3, show_default=True, help="worker processes")
@click.option("--faults", default=12, show_default=True, help="faults injected (kinds in turn)")
@click.option("--seed", default=1, show_default=True, help="seeds the faults: what, whom, when")
@click.option("--lease", default=1.0, show_default=True, help="the workers' lease, seconds")
@click.option(
    "--pause",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="a tool takes up to twice this, seconds",
)
@click.option("--drain", default=60.0, show_default=True, help="longest wait for the end")
@click.option("--postgres-url", default=POSTGRES_URL, show_default=True)
@click.option("--keep", type=click.Path(path_type=Path), default=None, help="keep logs here")
def main(
    db: Literal["sqlite", "postgres"],
    runs: int,
    workers: int,
    faults: int,
    seed: int,
    lease: float,
    pause: float,
    drain: float,
    postgres_url: str,
    keep: Path | None,
) -> None:
    """Torture a worker fleet and check its invariants; exit 1 on any violation."""
    options = Options(
        db,
        runs,
        workers,
        faults,
        seed,
        lease,
        pause,
        drain=drain,
        postgres_url=postgres_url,
        keep=keep is not None,
    )
    report = torture(options, keep)
    click.echo("\n".join(report.log))
    click.echo(report.table())
    for v in report.violations:
        click.echo(str(v))
    sys.exit(1 if report.violations else 0)
