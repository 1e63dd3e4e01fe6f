"""`agentsm tail RUN` / `agentsm tail --all`: print facts as another process records them."""

from __future__ import annotations

import asyncio
import json
import sys

import click

from eventstore import RunRecord

from ..errors import UsageError
from ..render import Style, printable
from ..source import open_store, resolve_run
from ..tail import ENDED, LiveFact, follow
from .common import example, limit_option
from .shared import db_option, reported

__all__ = ["tail_command"]


def render(fact: LiveFact, style: Style, *, with_run: bool) -> str:
    """One line per fact, with the columns of `agentsm show` (run id first with --all)."""
    e = fact.entry
    run = f"{style(fact.run_id, 'dim')}  " if with_run else ""
    return (
        f"{run}{e.seq:>4}  {e.step:>3}  {printable(e.state):<15}  "
        f"{style(f'{e.event:<20}', 'cyan')}  {printable(e.data)}"
    )


def _check_after(record: RunRecord, after: int) -> None:
    """Refuse an `--after` that leaves nothing to print of a run that has ended."""
    if record.status in ENDED and after >= record.last_seq:
        raise UsageError(
            f"Run {record.run_id} has ended with facts 1..{record.last_seq}; --after {after} "
            f"leaves none of them: give --after from 0 to {record.last_seq - 1}, or --follow "
            "to wait for more."
        )


@click.command("tail", epilog=example("agentsm tail 3f2a", "agentsm tail --all --new --json"))
@click.argument("run", required=False)
@click.option("--all", "every", is_flag=True, help="follow every run, new ones included")
@db_option
@click.option("--follow", "forever", is_flag=True, help="keep following after the run ends")
@click.option("--after", type=click.IntRange(min=0), default=0, help="start after this seq")
@click.option("--new", "only_new", is_flag=True, help="with --all: only facts recorded from now on")
@limit_option("facts, then stop", name="--count", default=0)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per fact")
@click.option(
    "--poll", type=click.FloatRange(min=0.01), default=1.0, help="longest sleep between looks"
)
def tail_command(
    run: str | None,
    every: bool,
    db: str,
    forever: bool,
    after: int,
    only_new: bool,
    count: int,
    as_json: bool,
    poll: float,
) -> None:
    """Print the facts of RUN (an id or a unique prefix) as they are recorded, from any
    process, and exit when the run ends (status 0 done, 1 failed or aborted) unless
    --follow; or, with --all, the facts of every run until interrupted."""
    if every == (run is not None):
        raise click.UsageError("give a RUN to follow, or --all (not both).")
    with reported():
        store = open_store(db, read_only=True)
    style = Style(sys.stdout)

    async def show() -> None:
        shown = 0
        facts = follow(
            store, run, after_seq=after, from_start=not only_new, until_end=not forever, poll=poll
        )
        async for fact in facts:
            if as_json:
                click.echo(json.dumps({"run_id": fact.run_id, **fact.entry.to_dict()}))
            else:
                click.echo(render(fact, style, with_run=every))
            shown += 1
            if count and shown >= count:
                return

    try:
        with reported():
            run = None if run is None else resolve_run(store, run)
            if run is not None and not forever:
                _check_after(store.run(run), after)
            asyncio.run(show())
            status = store.run(run).status if run is not None else None
    except KeyboardInterrupt:
        return
    finally:
        store.close()
    if status in ("failed", "aborted"):
        sys.exit(1)


if __name__ == "__main__":  # `python -m replay.cli.tail ...`: the command alone
    tail_command.main()  # pragma: no cover
