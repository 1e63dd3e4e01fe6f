"""Copying runs between logs, also between backends (SQLite to PostgreSQL and back), through the
export and import of `replay.transfer`: every fact with its hash chain, parent links and
catalog entry, checked on the way in and written in one transaction per group of runs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentsm.text import plural
from eventstore import EventStore

from .errors import CopyRefused
from .source import resolve_run
from .transfer import export_run, facts_of, import_runs

__all__ = ["CopyReport", "copy_runs"]

GROUP = 100
"""How many runs one transaction of the destination takes."""


@dataclass(frozen=True)
class CopyReport:
    """What a copy did: the runs copied, and those the destination held already, the same."""

    copied: tuple[str, ...]
    present: tuple[str, ...]

    def __str__(self) -> str:
        there = f", {len(self.present)} already there" if self.present else ""
        return f"{plural(len(self.copied), 'run')} copied{there}"


def copy_runs(src: EventStore, dst: EventStore, run_ids: Iterable[str] | None = None) -> CopyReport:
    """Copy runs (ids or unique prefixes; every run of `src` when None) into `dst`, parents
    before their branches. A run `dst` holds already with the same facts is left as it is (so a
    copy that stopped can be run again); one with other facts, or whose hash chain is broken in
    `src`, is refused (`CopyRefused`) before anything is written."""
    wanted = (
        [r.run_id for r in src.runs()]
        if run_ids is None
        else list(dict.fromkeys(resolve_run(src, r) for r in run_ids))
    )
    known = {r.run_id for r in dst.runs()}
    todo: list[str] = []
    present: list[str] = []
    for run_id in _parents_first(src, wanted):
        report = src.verify(run_id)
        if not report.ok:
            raise CopyRefused(run_id, f"its hash chain is broken in the source ({report.broken})")
        if run_id in known:
            if facts_of(dst.read(run_id)) != facts_of(src.read(run_id)):
                raise CopyRefused(
                    run_id, "the destination holds a run with that id and other facts"
                )
            present.append(run_id)
        else:
            todo.append(run_id)
    for start in range(0, len(todo), GROUP):
        group = todo[start : start + GROUP]
        lines = [line for run_id in group for line in export_run(src, run_id)]
        import_runs(dst, lines, name="the source")
    return CopyReport(tuple(todo), tuple(present))


def _parents_first(store: EventStore, run_ids: Sequence[str]) -> list[str]:
    """The runs in an order where a parent comes before its branches (when both are copied)."""
    chosen = set(run_ids)
    parent = {r.run_id: r.parent_id for r in store.runs() if r.run_id in chosen}
    ordered: list[str] = []
    placed: set[str] = set()

    def place(run_id: str) -> None:
        if run_id in placed:
            return
        placed.add(run_id)
        up = parent.get(run_id)
        if up is not None and up in chosen:
            place(up)
        ordered.append(run_id)

    for run_id in run_ids:
        place(run_id)
    return ordered
