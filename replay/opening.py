"""Opening a log for replay and the command line: `eventstore.open_store`, plus the catalog
summaries an older log lacks, written once where the user may write the log. Only this and
eventstore load on the way to a listing; the folding that a back-fill needs loads when a log
needs one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import eventstore
from eventstore import EventStore, SQLiteEventStore

__all__ = ["StoreLike", "can_write", "open_store", "opened"]

StoreLike = str | Path | EventStore


def open_store(
    db: StoreLike, *, read_only: bool = False, create: bool = False, **options: Any
) -> EventStore:
    """The store itself, or the log at that path or URL (`eventstore.open_store`): an existing
    one only unless `create`; `read_only` opens it so that nothing can be written to it;
    `options` go to the store (`lease`, `busy_timeout`, ...). A log with runs that have no
    catalog summary (from an older release, or imported by one) that the user may write gets
    them back-filled once (`agentsm.catalog.backfill`; a SQLite log is migrated first), so that
    listings never fold a run; an up-to-date log opened `read_only` is never written (a
    PostgreSQL log opened `read_only` never is)."""
    if not isinstance(db, str | Path):
        return db
    store = eventstore.open_store(db, create=create, read_only=read_only, **options)
    if not isinstance(store, SQLiteEventStore):
        return _backfilled(store)  # nothing to do where it is read-only
    if not store.unsummarized():
        return store
    if read_only and not can_write(Path(store.path)):
        return store
    if read_only:
        store.close()
        store = SQLiteEventStore(store.path, create=False, **options)
    _backfilled(store)
    if not read_only:
        return store
    store.close()
    return SQLiteEventStore(store.path, create=False, read_only=True, **options)


@contextmanager
def opened(db: StoreLike, **options: Any) -> Iterator[EventStore]:
    """`open_store(db, **options)` for the length of a `with`: a store opened here from a path
    or URL is closed at its end (its writer and lease-renewer threads with it); a store object
    given stays open, as its caller owns it."""
    store = open_store(db, **options)
    try:
        yield store
    finally:
        if store is not db:
            store.close()


def _backfilled(store: EventStore) -> EventStore:
    """The store, its runs without a catalog summary folded once; closed if that fails."""
    try:
        from agentsm.catalog import backfill  # folds runs: loaded only for an old log

        backfill(store)
    except BaseException:
        store.close()
        raise
    return store


def can_write(path: str | Path) -> bool:
    """Whether this user may write the log (and its directory, for the -wal and -shm files)."""
    path = Path(path)
    return path.is_file() and os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
