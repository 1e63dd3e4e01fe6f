"""The catalog of an up-to-date SQLite log read with the stdlib sqlite3 module alone, for
`agentsm runs`: no store, no writer thread, no hash chain, no dataclass records, so that the
listing answers about as fast as `agentsm --help` (benchmarks/startup.py).

`CatalogFile.open` gives up (None) wherever the store would do more than read: a URL, a file
that is missing or not a log, a schema newer than this release's or without the catalog's
summary and driver columns, runs without a catalog summary (which the store back-fills), any
SQLite error. The command then opens the log
through the store as every other command does, which reads the same rows (the SQL is
`eventstore.sqlite_catalog`'s) or says what is wrong."""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventstore.migrations import LATEST
from eventstore.sqlite_catalog import (
    DRIVER_COLUMNS,
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    UNSUMMARIZED,
    lower,
    run_record,
    runs_query,
)

if TYPE_CHECKING:
    from eventstore import RunRecord

__all__ = ["CatalogFile", "ListedRun", "ListedSummary"]

_COLUMNS = RUN_COLUMNS + DRIVER_COLUMNS + SUMMARY_COLUMNS
_NEEDED = frozenset(_COLUMNS.replace(",", " ").split())
"""The catalog columns the listing reads (a log from before the summaries has fewer)."""


class ListedSummary:
    """What a listing shows of a run (the fields of `eventstore.RunSummary`)."""

    __slots__ = ("answer", "cost", "error", "input_tokens", "model", "output_tokens", "steps")

    def __init__(self, row: tuple[Any, ...]) -> None:
        self.steps: int = row[13]
        self.input_tokens: int = row[14] or 0
        self.output_tokens: int = row[15] or 0
        self.cost: float | None = row[16]
        self.model: str | None = row[17]
        self.answer: str | None = row[18]
        self.error: str | None = row[19]

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __repr__(self) -> str:
        return f"ListedSummary(steps={self.steps}, tokens={self.tokens})"


class ListedRun:
    """A run of the catalog as a listing reads it: the fields of `eventstore.RunRecord` that
    it shows; `record()` is the full `RunRecord` (loaded then), which tells whether the driver
    of a running run is gone."""

    __slots__ = (
        "branch_seq",
        "created_at",
        "info",
        "parent_id",
        "row",
        "run_id",
        "status",
        "summary",
        "task",
        "updated_at",
    )

    def __init__(self, row: tuple[Any, ...]) -> None:
        self.row = row
        self.run_id: str = row[0]
        self.task: str = row[1]
        self.status: str = row[2]
        self.created_at: float = row[3]
        self.updated_at: float = row[4]
        self.parent_id: str | None = row[6]
        self.branch_seq: int | None = row[7]
        self.info: dict[str, Any] = _info(row[8])
        self.summary = ListedSummary(row)

    def record(self) -> RunRecord:
        """The run as the store reads it."""
        return run_record(self.row)

    def driver_gone(self) -> bool:
        """Whether the run says "running" but no process drives it (`RunRecord.driver_gone`)."""
        return self.status == "running" and self.record().driver_gone()

    @property
    def shown_status(self) -> str:
        """The status as a reader should see it: "interrupted" for a run whose driver is gone."""
        return "interrupted" if self.driver_gone() else self.status

    def __repr__(self) -> str:
        return f"ListedRun(run_id={self.run_id!r}, status={self.status!r})"


def _info(text: str | None) -> dict[str, Any]:
    """A run's catalog info (JSON text; json loads for a run that has some)."""
    if not text or text == "{}":
        return {}
    import json

    info: dict[str, Any] = json.loads(text)
    return info


class CatalogFile:
    """A SQLite log's catalog, opened read-only (`open`) and read with `runs`, as
    `SQLiteEventStore.runs` reads it."""

    def __init__(self, path: str, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    @classmethod
    def open(cls, db: str) -> CatalogFile | None:
        """The catalog of the SQLite log at path `db`, or None where only the store may open it
        (see the module's docstring)."""
        path = db.strip()
        if not path or path == ":memory:" or "://" in path or path.lower().startswith("sqlite:"):
            return None
        try:
            if not Path(path).is_file():
                return None
            uri = f"file:{urllib.parse.quote(str(Path(path).resolve()))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        except (OSError, sqlite3.Error):
            return None
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
            if 0 < version <= LATEST and "eventstore_migrations" in tables and _NEEDED <= columns:
                if not conn.execute(UNSUMMARIZED + " LIMIT 1").fetchall():
                    conn.create_function("unicode_lower", 1, lower, deterministic=True)
                    return cls(path, conn)
        except sqlite3.Error:
            pass
        conn.close()
        return None

    def runs(
        self,
        *,
        status: str | None = None,
        model: str | None = None,
        task: str | None = None,
        since: float | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[ListedRun]:
        """The runs filtered and ordered as `SQLiteEventStore.runs` gives them."""
        sql, args = runs_query(
            _COLUMNS,
            status=status,
            model=model,
            task=task,
            since=since,
            limit=limit,
            newest_first=newest_first,
        )
        return [ListedRun(row) for row in self._conn.execute(sql, args)]

    def close(self) -> None:
        self._conn.close()

    def __repr__(self) -> str:
        return f"CatalogFile({self.path!r})"
