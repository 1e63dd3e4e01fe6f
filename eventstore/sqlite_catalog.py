"""The SQL of a SQLite log's catalog (the `runs` table), apart from the store: the store builds
its queries here, and so does a listing that reads the file with the stdlib sqlite3 module alone
(`agentsm runs`), so that both select the same runs in the same order. Nothing here loads a
module; a `RunRecord` is made from a row by `run_record`, which loads the records then."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .records import RunRecord

__all__ = [
    "DRIVER_COLUMNS",
    "NO_DRIVER_COLUMNS",
    "RUN_COLUMNS",
    "SUMMARY_COLUMNS",
    "UNSUMMARIZED",
    "lower",
    "run_record",
    "runs_query",
]

RUN_COLUMNS = "run_id, task, status, created_at, updated_at, last_seq, parent_id, branch_seq, info"
DRIVER_COLUMNS = ", driver_host, driver_pid, driver_started, lease_until"
NO_DRIVER_COLUMNS = ", NULL, NULL, NULL, NULL"
"""In place of `DRIVER_COLUMNS` in a log from before the catalog named drivers."""
SUMMARY_COLUMNS = ", steps, input_tokens, output_tokens, cost, model, answer, error"

UNSUMMARIZED = (
    "SELECT run_id, created_at FROM runs INDEXED BY runs_unsummarized "
    "WHERE steps IS NULL AND last_seq > 0"
)
"""The runs with facts but no summary (logged before the catalog kept them)."""


def runs_query(
    columns: str,
    *,
    status: str | None = None,
    model: str | None = None,
    task: str | None = None,
    since: float | None = None,
    limit: int | None = None,
    newest_first: bool = False,
    parents: Sequence[str] = (),
) -> tuple[str, tuple[Any, ...]]:
    """The SELECT of `columns` and its arguments for the runs filtered by exact `status` and
    `model`, a case-insensitive substring of the task (through the connection's
    `unicode_lower`, see `lower`), a last fact at or after `since` and a parent among `parents`
    (none: any), ordered by creation (newest first with `newest_first`), at most `limit`."""
    where: list[str] = []
    args: list[Any] = []
    if parents:
        where.append(f"parent_id IN ({', '.join('?' * len(parents))})")
        args.extend(parents)
    if status is not None:
        where.append("status = ?")
        args.append(status)
    if model is not None:
        where.append("model = ?")
        args.append(model)
    if task is not None:
        where.append("instr(unicode_lower(task), ?) > 0")
        args.append(task.lower())
    if since is not None:
        where.append("updated_at >= ?")
        args.append(since)
    sql = f"SELECT {columns} FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    order = "DESC" if newest_first else ""
    sql += f" ORDER BY created_at {order}, rowid {order}"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(max(limit, 0))
    return sql, tuple(args)


def lower(text: str | None) -> str | None:
    """`unicode_lower(text)` in SQL: Python's `str.lower`, every letter (SQLite's `lower` and
    `NOCASE` know ASCII letters only), as PostgreSQL's `lower`."""
    return None if text is None else text.lower()


def run_record(row: Sequence[Any]) -> RunRecord:
    """The `RunRecord` of a row of `RUN_COLUMNS`, the driver's (or `NO_DRIVER_COLUMNS`) and,
    where the log has them, `SUMMARY_COLUMNS`."""
    import json

    from .driver import Driver
    from .records import RunRecord, RunSummary

    summary = RunSummary()
    if len(row) > 13 and row[13] is not None:
        summary = RunSummary(
            steps=row[13],
            input_tokens=row[14] or 0,
            output_tokens=row[15] or 0,
            cost=row[16],
            model=row[17],
            answer=row[18],
            error=row[19],
        )
    return RunRecord(
        run_id=row[0],
        task=row[1],
        status=row[2],
        created_at=row[3],
        updated_at=row[4],
        last_seq=row[5],
        parent_id=row[6],
        branch_seq=row[7],
        info=json.loads(row[8] or "{}"),
        driver=Driver(row[9], row[10], row[11] or "") if row[9] else None,
        lease_until=row[12],
        summary=summary,
    )
