"""Where the recorded runs come from: a log (SQLite file or PostgreSQL URL), opened read-only,
or `agentsm export` files imported into a log in memory, each process its own."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import eventstore
from agentsm import AgentError
from eventstore import EventStore, RunRecord, SQLiteEventStore, StoreError
from replay.cli.listing import select
from replay.transfer import import_runs

__all__ = ["EXPORT_SUFFIXES", "Filters", "RecordedSource", "Unreadable"]

EXPORT_SUFFIXES = (".jsonl", ".ndjson")
_SQLITE_HEADER = b"SQLite format 3\x00"


class Unreadable(Exception):
    """The runs of a source cannot be read: its message names the file or log and says why."""


@dataclass(frozen=True)
class Filters:
    """Which runs become tests: the catalog's status (or `error`, `interrupted`), a substring
    of the task, a last fact at or after an epoch time."""

    status: str | None = None
    task: str | None = None
    since: float | None = None


class RecordedSource:
    """One `--agentsm-replay` value: named as given (a URL without its password), opened on
    first use and kept open for the replays of its runs until `close`."""

    def __init__(self, given: str) -> None:
        self.given = given
        self.is_url = "://" in given
        self.path = None if self.is_url else Path(given)
        self._store: EventStore | None = None

    @property
    def label(self) -> str:
        """The source as test ids show it: the path given, or the URL without a password."""
        if not self.is_url:
            return self.given
        parts = urllib.parse.urlsplit(self.given)
        if parts.password is None:
            return self.given
        host = parts.netloc.rpartition("@")[2]
        netloc = f"{parts.username}@{host}" if parts.username else host
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))

    def problem(self) -> str | None:
        """Why the source cannot be read at all (a missing path, an empty folder), or None."""
        if self.path is None:
            return None
        if not self.path.exists():
            return (
                f"--agentsm-replay {self.given!r}: no such file or folder; give a SQLite log, a "
                "postgresql:// URL, or a file or folder of `agentsm export` files."
            )
        if self.path.is_dir() and not self.exports():
            return (
                f"--agentsm-replay {self.given!r}: the folder holds no export files "
                f"({', '.join('*' + s for s in EXPORT_SUFFIXES)}); write them with "
                "`agentsm export RUN > DIR/RUN.jsonl`."
            )
        return None

    def exports(self) -> list[Path]:
        """The export files of the source, in a fixed order (none for a log)."""
        if self.path is None:
            return []
        if self.path.is_dir():
            found = (p for p in self.path.rglob("*") if p.suffix in EXPORT_SUFFIXES)
            return sorted(p for p in found if p.is_file())
        with self.path.open("rb") as f:
            return [] if f.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER else [self.path]

    def store(self) -> EventStore:
        """The runs' store: the log, opened so that nothing can be written to it (so that the
        workers of `pytest -n` read it side by side), or the exports imported in memory."""
        if self._store is None:
            files = self.exports()
            if not files:
                try:
                    self._store = eventstore.open_store(self.given, read_only=True, create=False)
                except (AgentError, StoreError) as e:
                    raise Unreadable(f"{self.label}: {e}") from e
            else:
                self._store = _imported(files)
        return self._store

    def runs(self, filters: Filters) -> list[RunRecord]:
        """The runs that pass the filters, oldest first (the same list in every process)."""
        store = self.store()
        try:
            return select(
                store,
                status=filters.status,
                model=None,
                task=filters.task,
                since=filters.since,
                limit=None,
            )
        except (AgentError, StoreError) as e:
            raise Unreadable(f"{self.label}: {e}") from e

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __repr__(self) -> str:
        return f"RecordedSource({self.label!r})"


def _imported(files: list[Path]) -> EventStore:
    """A log in memory holding the runs of the export files, each file checked whole."""
    store = SQLiteEventStore(":memory:")
    try:
        for file in files:
            try:
                import_runs(store, file.read_text().splitlines(), name=str(file))
            except (AgentError, StoreError, OSError, UnicodeDecodeError) as e:
                raise Unreadable(f"{file}: {e}") from e
    except BaseException:
        store.close()
        raise
    return store
