"""The store backends the contract tests run on: a SQLite file, SQLite in memory, and a real
PostgreSQL server ($AGENTSM_TEST_POSTGRES_URL), each test in a schema of its own."""

from __future__ import annotations

import functools
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from eventstore import EventStore, SQLiteEventStore, open_store

POSTGRES_URL = os.environ.get(
    "AGENTSM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
HOW_TO_RUN = (
    f"PostgreSQL tests skipped: no server answers at {POSTGRES_URL}; start one (trust auth) or "
    "set AGENTSM_TEST_POSTGRES_URL=postgresql://user@host:port/db to run them."
)
SKIPPED: list[str] = []  # the tests skipped for want of a server, for the summary line


@functools.cache
def postgres_reachable() -> bool:
    """Whether the test server answers (asked once per session)."""
    try:
        import psycopg
    except ImportError:
        return False
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def require_postgres(request: pytest.FixtureRequest) -> str:
    """The server's URL, or skip the test (fail it under CI=true, where the server must be up)."""
    if postgres_reachable():
        return POSTGRES_URL
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(HOW_TO_RUN.replace("tests skipped", "tests cannot run under CI=true"))
    SKIPPED.append(request.node.nodeid)
    pytest.skip(HOW_TO_RUN)


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class Backend:
    """One backend for one test: `url` opens it (`open_store` or `--db`), `open()` gives a
    store on it (closed after the test), `execute()` runs raw SQL on its tables."""

    def __init__(self, name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.name = name
        self.schema: str | None = None
        self._stores: list[EventStore] = []
        self._memory: SQLiteEventStore | None = None
        if name == "postgresql":
            self.server = require_postgres(request)
            self.schema = f"t_{uuid.uuid4().hex[:16]}"
            self.url = with_schema(self.server, self.schema)
        elif name == "sqlite-file":
            self.url = str(tmp_path / "log.db")
        else:
            self.url = ":memory:"

    @property
    def shared(self) -> bool:
        """Whether two stores opened on it see one log (not so for SQLite in memory)."""
        return self.name != "sqlite-memory"

    def open(self, **kw: Any) -> EventStore:
        if self.name == "sqlite-memory":
            if self._memory is None:
                self._memory = SQLiteEventStore(":memory:", **kw)
                self._stores.append(self._memory)
            return self._memory
        store = open_store(self.url, **kw)
        self._stores.append(store)
        return store

    def execute(self, statement: str, args: tuple[Any, ...] = ()) -> None:
        """Run one statement on the log's tables directly, as a user with a SQL shell would."""
        if self.name == "postgresql":
            import psycopg
            from psycopg import sql

            with psycopg.connect(self.server, autocommit=True) as conn:
                conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
                conn.execute(statement.replace("?", "%s").encode(), args)
        elif self.name == "sqlite-file":
            conn = sqlite3.connect(self.url, isolation_level=None)
            try:
                conn.execute(statement, args)
            finally:
                conn.close()
        else:
            assert self._memory is not None
            self._memory._conn.execute(statement, args)

    def close(self) -> None:
        for store in self._stores:
            store.close()
        if self.schema is not None:
            drop_schema(self.server, self.schema)

    def __repr__(self) -> str:
        return f"Backend({self.name})"
