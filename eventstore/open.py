"""Opening a log from a path or a URL: a path or `sqlite:///path` is SQLite, `postgresql://`
(or `postgres://`) is PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import StoreError
from .pg_url import is_postgres_url
from .protocol import EventStore
from .sqlite import SQLiteEventStore

if TYPE_CHECKING:
    from .postgres import PostgresEventStore

__all__ = ["open_store", "postgres_store_class"]


def postgres_store_class() -> type[PostgresEventStore]:
    """`PostgresEventStore`, imported on first use: psycopg is the optional `postgres` extra."""
    try:
        from .postgres import PostgresEventStore
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("psycopg"):
            raise
        raise StoreError(
            f"PostgreSQL needs psycopg ({e}); install it with: pip install 'agentsm[postgres]'."
        ) from e
    return PostgresEventStore


def sqlite_path(url: str) -> str:
    """The file of a `sqlite:` URL, as SQLAlchemy spells them: `sqlite:///relative/file.db`,
    `sqlite:////absolute/file.db`, and `sqlite://` for a database in memory."""
    rest = url[len("sqlite:") :]
    if rest in ("", "//"):
        return ":memory:"
    if rest.startswith("///") and len(rest) > 3:
        return rest[3:]
    raise StoreError(
        f"{url!r} is not a SQLite URL agentsm reads: write sqlite:///relative/path.db, "
        "sqlite:////absolute/path.db, or just the path."
    )


def open_store(
    path_or_url: str | Path, *, read_only: bool = False, create: bool = True, **kw: Any
) -> EventStore:
    """The event store at a path or URL. `create=False` opens an existing log only (never
    makes a new empty one); `read_only=True` writes nothing; other keywords go to the store's
    constructor (`durability`, `lease`, `schema`, ...)."""
    if isinstance(path_or_url, Path):
        return SQLiteEventStore(path_or_url, create=create, read_only=read_only, **kw)
    text = path_or_url.strip()
    if is_postgres_url(text):
        return postgres_store_class()(text, create=create, read_only=read_only, **kw)
    if text.lower().startswith("sqlite:"):
        text = sqlite_path(text)
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise StoreError(
            f"{scheme}:// is not a database agentsm can use: give a SQLite path (or "
            "sqlite:///path) or a postgresql:// URL."
        )
    return SQLiteEventStore(text, create=create, read_only=read_only, **kw)
