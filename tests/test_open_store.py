"""One URL everywhere: `open_store` picks the backend from a path or URL, and a PostgreSQL log
is opened, created and migrated as safely as a SQLite file."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from agentsm import LlmResponse
from eventstore import (
    NewEvent,
    NotAnEventLog,
    PostgresEventStore,
    SchemaVersionError,
    SQLiteEventStore,
    StoreError,
    open_store,
)
from eventstore.pg_schema import LATEST, MIGRATIONS

from .backends import drop_schema, require_postgres, with_schema
from .scenarios import LONG, base


@pytest.fixture
def server(request: pytest.FixtureRequest) -> str:
    return require_postgres(request)


@pytest.fixture
def schema(server: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:16]}"
    yield name
    drop_schema(server, name)


def test_a_path_or_sqlite_url_opens_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for given, file in (
        (str(tmp_path / "a.db"), tmp_path / "a.db"),
        (tmp_path / "b.db", tmp_path / "b.db"),
        ("sqlite:///c.db", tmp_path / "c.db"),
        (f"sqlite:///{tmp_path / 'd.db'}", tmp_path / "d.db"),
    ):
        store = open_store(given)
        assert isinstance(store, SQLiteEventStore) and file.exists()
        store.close()
    memory = open_store("sqlite://")
    assert isinstance(memory, SQLiteEventStore) and memory.path == ":memory:"
    with pytest.raises(NotAnEventLog, match="No database at"):
        open_store(str(tmp_path / "missing.db"), create=False)


@pytest.mark.parametrize(
    "url, message",
    [
        ("mysql://root@127.0.0.1/test", "mysql:// is not a database agentsm can use"),
        ("sqlite:/x.db", "not a SQLite URL agentsm reads"),
    ],
)
def test_an_unknown_url_is_refused_with_what_to_give(url: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        open_store(url)


def test_without_psycopg_a_postgresql_url_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "eventstore.postgres")
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError, match=r"pip install 'agentsm\[postgres\]'"):
        open_store("postgresql://me@127.0.0.1/db")


def test_a_server_that_does_not_answer_is_named_without_its_password() -> None:
    with pytest.raises(StoreError) as refused:
        open_store("postgresql://ann:s3cret@127.0.0.1:1/db", connect_timeout=2)
    text = str(refused.value)
    assert text.startswith(
        "Cannot connect to postgresql://ann@127.0.0.1:1/db: is the server running"
    )
    assert "s3cret" not in text


def test_a_postgresql_url_opens_postgresql_in_its_schema(server: str, schema: str) -> None:
    url = with_schema(server, schema)
    with pytest.raises(NotAnEventLog, match="holds no agentsm event log"):
        open_store(url, create=False)
    store = open_store(url)
    assert isinstance(store, PostgresEventStore) and store.schema == schema
    assert schema in repr(store)
    store.create_run("r", "task")
    store.close()
    with closing(open_store(url, create=False)) as again:
        assert [r.run_id for r in again.runs()] == ["r"]


def test_workers_starting_at_once_migrate_a_new_schema_once(server: str, schema: str) -> None:
    url = with_schema(server, schema)
    barrier = threading.Barrier(6)
    opened: list[PostgresEventStore] = []
    failed: list[BaseException] = []

    def start() -> None:
        barrier.wait()
        try:
            opened.append(PostgresEventStore(url, pool_size=2))
        except BaseException as e:  # noqa: BLE001 - reported below
            failed.append(e)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in opened:
        store.close()
    assert failed == [] and len(opened) == 6
    with psycopg.connect(server) as conn:
        rows = conn.execute(f"SELECT version FROM {schema}.eventstore_migrations").fetchall()
    assert [r[0] for r in rows] == list(range(1, LATEST + 1))


def test_a_schema_with_other_tables_is_left_untouched(server: str, schema: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.customers (id int)")
    with pytest.raises(NotAnEventLog, match="holds tables but no agentsm event log"):
        open_store(with_schema(server, schema))
    with psycopg.connect(server) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
    assert tables == [("customers",)]


def test_a_newer_schema_is_refused(server: str, schema: str) -> None:
    PostgresEventStore(server, schema=schema).close()
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {schema}.eventstore_migrations VALUES (%s, 'future', 0)", (LATEST + 1,)
        )
    with pytest.raises(SchemaVersionError, match="Upgrade agentsm"):
        PostgresEventStore(server, schema=schema)


def test_the_builder_records_into_a_postgresql_url(server: str, schema: str) -> None:
    url = with_schema(server, schema)
    engine = (
        base("question", [LlmResponse.final_answer(LONG)]).store(url).durability("full").build()
    )
    assert engine.run() == LONG
    engine.store.close()
    with closing(open_store(url, create=False, read_only=True)) as store:
        record = store.run(engine.run_id)
        assert record.status == "done" and store.verify(engine.run_id).ok


def test_a_watcher_wakes_for_its_own_schema_only(server: str, schema: str) -> None:
    other = f"{schema}_b"
    mine = PostgresEventStore(server, schema=schema)
    theirs = PostgresEventStore(server, schema=other)
    try:
        mine.wait_for_append(0)  # listening from here on
        theirs.create_run("r", "task", events=[NewEvent("A", "{}", "{}", 0.0, 1)])
        assert mine.wait_for_append(1.0) is False  # another log's append is not ours
        mine.create_run("r", "task", events=[NewEvent("A", "{}", "{}", 0.0, 1)])
        assert mine.wait_for_append(10) is True
    finally:
        mine.close()
        theirs.close()
        drop_schema(server, other)


def test_a_version_1_schema_is_brought_up_to_date(server: str, schema: str) -> None:
    PostgresEventStore(server, schema=schema).close()
    first = next(s for s in MIGRATIONS[0][2] if "FUNCTION events_notify()" in s)
    with psycopg.connect(server, autocommit=True) as conn:  # as an older agentsm left it
        conn.execute(f"DELETE FROM {schema}.eventstore_migrations WHERE version > 1")
        conn.execute(f"SET search_path TO {schema}")  # its trigger notifies the shared channel
        conn.execute(first.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION").encode())
    store = PostgresEventStore(server, schema=schema)
    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute(f"SELECT version FROM {schema}.eventstore_migrations").fetchall()
    assert sorted(r[0] for r in rows) == list(range(1, LATEST + 1))
    store.wait_for_append(0)
    store.create_run("r", "task", events=[NewEvent("A", "{}", "{}", 0.0, 1)])
    assert store.wait_for_append(10) is True
    store.close()
