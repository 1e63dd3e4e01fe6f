"""`agentsm runs`: the catalog of a log as a table, JSON or CSV, read without folding a
single run. An up-to-date SQLite log is read with the sqlite3 module alone
(`replay.cli.catalog_file`), any other through its store: the listing loads no more than click,
sqlite3 and the table renderer, so that it answers at once (benchmarks/startup.py)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import click

from agentsm.marks import subagent_of
from agentsm.tables import Column

from .catalog_file import CatalogFile
from .common import (
    Listing,
    common,
    db_path,
    example,
    format_options,
    limit_option,
    open_log,
    parse_since,
    shown,
    status_cell,
    when,
)

if TYPE_CHECKING:  # types only: the listing defines no class it does not use
    from collections.abc import Mapping, Sequence
    from typing import Protocol, TypeVar

    from eventstore import RunRecord

    class Summarized(Protocol):
        """What a listing shows of a run's summary (`RunSummary`, `ListedSummary`)."""

        @property
        def steps(self) -> int: ...
        @property
        def input_tokens(self) -> int: ...
        @property
        def output_tokens(self) -> int: ...
        @property
        def tokens(self) -> int: ...
        @property
        def cost(self) -> float | None: ...
        @property
        def model(self) -> str | None: ...
        @property
        def answer(self) -> str | None: ...
        @property
        def error(self) -> str | None: ...

    class Listed(Protocol):
        """A run as a listing reads it: a `RunRecord` from a store, or a `ListedRun` read from
        the file alone."""

        @property
        def run_id(self) -> str: ...
        @property
        def task(self) -> str: ...
        @property
        def status(self) -> str: ...
        @property
        def shown_status(self) -> str: ...
        @property
        def created_at(self) -> float: ...
        @property
        def updated_at(self) -> float: ...
        @property
        def parent_id(self) -> str | None: ...
        @property
        def branch_seq(self) -> int | None: ...
        @property
        def info(self) -> Mapping[str, Any]: ...
        @property
        def summary(self) -> Summarized: ...
        def driver_gone(self) -> bool: ...

    R = TypeVar("R", bound=Listed)
    R_co = TypeVar("R_co", bound=Listed, covariant=True)

    class Catalog(Protocol[R_co]):
        """Where a listing reads runs from: an `EventStore`, or a `CatalogFile`."""

        def runs(
            self,
            *,
            status: str | None,
            model: str | None,
            task: str | None,
            since: float | None,
            limit: int | None,
            newest_first: bool,
        ) -> Sequence[R_co]: ...


__all__ = ["RUN_COLUMNS", "RUN_KEYS", "STATUSES", "run_record", "runs", "select"]

STATUSES = (
    "created",
    "queued",
    "running",
    "waiting",
    "ready",
    "done",
    "failed",
    "aborted",
    "stopped",
    "interrupted",
    "imported",
    "error",
)
"""What `--status` takes: the catalog's statuses, `interrupted` (running, its driver gone) and
`error` (failed or aborted)."""


def select(
    store: Catalog[R],
    *,
    status: str | None,
    model: str | None,
    task: str | None,
    since: float | None,
    limit: int | None,
) -> list[R]:
    """The newest `limit` runs matching the filters, oldest first, from the catalog alone (of a
    store, or of a `CatalogFile`)."""
    if status is not None and status not in STATUSES:
        from ..errors import UsageError  # loaded for the error only

        raise UsageError(f"--status {status!r}: use one of {', '.join(STATUSES)}.")
    wanted = {"error": ("failed", "aborted"), "interrupted": ("running",)}.get(
        status or "", (status,)
    )
    found: list[R] = []
    for one in wanted:  # interrupted runs are told apart from live ones before the limit
        found += store.runs(
            status=one,
            model=model,
            task=task,
            since=since,
            limit=None if status == "interrupted" else limit,
            newest_first=True,
        )
    if status == "interrupted":
        found = [r for r in found if r.driver_gone()]
    found.sort(key=lambda r: r.created_at, reverse=True)
    return list(reversed(found[:limit] if limit is not None else found))


def _parent_cell(r: Listed, tool: str | None) -> str:
    """Where the run comes from: `PARENT@SEQ` for a branch, and the tool for a sub-agent."""
    if not r.parent_id:
        return ""
    return f"{r.parent_id}@{r.branch_seq}" + (f" sub-agent {tool}" if tool else "")


def _tree(records: Sequence[R]) -> list[tuple[R, int]]:
    by_id = {r.run_id: r for r in records}
    children: dict[str | None, list[R]] = {}
    for r in records:
        children.setdefault(r.parent_id if r.parent_id in by_id else None, []).append(r)
    ordered: list[tuple[R, int]] = []

    def walk(parent: str | None, level: int) -> None:
        for r in children.get(parent, []):
            ordered.append((r, level))
            walk(r.run_id, level + 1)

    walk(None, 0)
    return ordered


RUN_COLUMNS = (
    Column("id"),
    Column("task", flexible=True),
    Column("status"),
    Column("steps", "right", drop=1),
    Column("tokens", "right", drop=2),
    Column("cost", "right", drop=5),
    Column("model", drop=3),
    Column("started", drop=4),
    Column("duration", "right", drop=6),
    Column("parent", drop=7),
    Column("answer / error", flexible=True),
)


RUN_KEYS = (
    "run_id",
    "task",
    "status",
    "steps",
    "input_tokens",
    "output_tokens",
    "cost",
    "model",
    "created_at",
    "updated_at",
    "parent_id",
    "branch_seq",
    "subagent",
    "answer",
    "error",
)
"""The fields of a run in `runs --json` and `--csv` (`subagent`: the sub-agent tool whose call
at `parent_id`@`branch_seq` started the run; None for a branch or a root)."""


def run_record(r: Listed) -> dict[str, Any]:
    """A run as plain data (what `runs --json` and `--csv` give)."""
    s = r.summary
    return {
        "run_id": r.run_id,
        "task": r.task,
        "status": r.shown_status,
        "steps": s.steps,
        "input_tokens": s.input_tokens,
        "output_tokens": s.output_tokens,
        "cost": s.cost,
        "model": s.model,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "parent_id": r.parent_id,
        "branch_seq": r.branch_seq,
        "subagent": subagent_of(r),
        "answer": s.answer,
        "error": s.error,
    }


@click.command(
    epilog=example(
        "agentsm runs -n 50 --status error --since 2h --task invoice --model gpt-4o",
        "agentsm runs --tree",
        "agentsm runs --json | jq '.[].run_id'",
    )
)
@limit_option("runs, the newest")
@click.option("--status", metavar="STATUS", help=f"only this status: {', '.join(STATUSES)}")
@click.option(
    "--since", metavar="WHEN", help="last fact within a duration (2h, 1d) or since a date"
)
@click.option("--task", metavar="TEXT", help="task contains TEXT (any case)")
@click.option("--model", metavar="MODEL", help="only runs of this model")
@click.option(
    "--tree", is_flag=True, help="show families as a tree (└ a branch, ↳ a sub-agent run)"
)
@format_options
@common
def runs(
    limit: int,
    status: str | None,
    since: str | None,
    task: str | None,
    model: str | None,
    tree: bool,
    fmt: str | None,
) -> None:
    """List the runs of the log, newest last: status, steps, tokens, cost, model, and the start
    of the answer or error (read from the catalog; no run is folded)."""
    filters: dict[str, Any] = dict(
        status=status, model=model, task=task, since=parse_since(since), limit=limit or None
    )
    records: Sequence[Listed] | None = None if tree else _from_the_file(**filters)
    from_store: list[RunRecord] = []
    if records is None:  # any log, through its store (a tree reads the judgements there too)
        store = open_log()
        records = from_store = select(store, **filters)
    if not records and fmt is None:
        filtered = any(x is not None for x in (status, since, task, model))
        click.echo(f"No runs{' match' if filtered else ''} in {shown(db_path())}.")
        return
    listing = Listing(RUN_COLUMNS, RUN_KEYS)
    placed = _tree(records) if tree else [(r, 0) for r in records]
    notes: dict[str, str] = {}
    if tree:  # best of N: the pick marked
        from ..judgement import family_notes

        notes = family_notes(store, from_store)
    for r, depth in placed:
        s = r.summary
        tool = subagent_of(r)
        listing.add(
            run_record(r),
            [
                "  " * depth
                + (("↳ " if tool else "└ ") if depth else "")
                + r.run_id
                + _star(notes, r.run_id),
                r.task,
                status_cell(r.shown_status),
                str(s.steps),
                str(s.tokens),
                f"${s.cost:.4f}" if s.cost is not None else "",
                s.model or "",
                when(r.created_at),
                f"{r.updated_at - r.created_at:.2f}s" if r.updated_at >= r.created_at else "",
                _parent_cell(r, tool),
                _said(notes, r),
            ],
        )
    listing.emit(fmt)


def _star(notes: dict[str, str], run_id: str) -> str:
    """A picked candidate's mark in `runs --tree`."""
    return " ★" if notes.get(run_id, "").startswith("★") else ""


def _said(notes: dict[str, str], r: Listed) -> str:
    """The answer or error of a run as a listing shows it; a judgement says what it picked."""
    said = r.summary.answer or (f"error: {r.summary.error}" if r.summary.error else "")
    note = notes.get(r.run_id, "")
    return f"{note}: {said}" if note and not note.startswith("★") else said


def _from_the_file(**filters: Any) -> Sequence[Listed] | None:
    """The runs `select` gives, read from an up-to-date SQLite log with sqlite3 alone; None
    where the log must be opened through its store (`CatalogFile.open`)."""
    catalog = CatalogFile.open(db_path())
    if catalog is None:
        return None
    try:
        return select(catalog, **filters)
    except sqlite3.Error:  # changed under us: the store reads it (or says what is wrong)
        return None
    finally:
        catalog.close()
