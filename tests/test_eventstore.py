"""The event store contract, run against every backend (SQLite in memory and in a file)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlite_utils

from eventstore import (
    SCHEMA_VERSION,
    ConcurrencyError,
    EventStore,
    NewEvent,
    NotAnEventLog,
    SchemaVersionError,
    SQLiteEventStore,
    StoreError,
    UnknownRun,
)
from eventstore.migrations import FORMAT1, MIGRATIONS, migrate

pytestmark = pytest.mark.usefixtures("format1_logs")  # these tests edit format 1's rows


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteEventStore]:
    path = ":memory:" if request.param == "memory" else tmp_path / "log.db"
    s = SQLiteEventStore(path)
    yield s
    s.close()


def ev(kind: str, n: int = 0) -> NewEvent:
    return NewEvent(kind, f'{{"n": {n}}}', '{"state": "Planning"}', float(n))


def test_implements_the_protocol(store: SQLiteEventStore) -> None:
    assert isinstance(store, EventStore)


def test_append_and_read_in_order(store: SQLiteEventStore) -> None:
    store.create_run("r", "task")
    assert store.append("r", 0, [ev("A", 1), ev("B", 2)], status="running") == 2
    assert store.append("r", 2, [ev("C", 3)]) == 3
    events = store.read("r")
    assert [(e.seq, e.kind) for e in events] == [(1, "A"), (2, "B"), (3, "C")]
    assert events[0].meta == {"state": "Planning"} and events[0].payload == '{"n": 1}'
    assert [e.seq for e in store.read("r", after=1, upto=2)] == [2]
    record = store.run("r")
    assert (record.last_seq, record.status, record.task) == (3, "running", "task")


def test_database_refuses_update_and_delete(store: SQLiteEventStore) -> None:
    store.create_run("r", "task")
    store.append("r", 0, [ev("A")])
    conn = store._conn
    with pytest.raises(sqlite3.IntegrityError, match="append-only: UPDATE is refused"):
        conn.execute("UPDATE events SET kind = 'B'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE is refused"):
        conn.execute("DELETE FROM events")
    assert [e.kind for e in store.read("r")] == ["A"]


EVENTS = "events (run_id, seq, kind, payload, meta, recorded_at, version)"


@pytest.mark.parametrize(
    "sql",
    [
        f"INSERT OR REPLACE INTO {EVENTS} VALUES ('r', 1, 'X', '{{}}', '{{}}', 0, 1)",
        f"REPLACE INTO {EVENTS} VALUES ('r', 2, 'X', '{{}}', '{{}}', 0, 1)",
        f"INSERT INTO {EVENTS} VALUES ('r', 4, 'X', '{{}}', '{{}}', 0, 1)",  # a gap after seq 2
        f"INSERT INTO {EVENTS} VALUES ('r', 0, 'X', '{{}}', '{{}}', 0, 1)",
        f"INSERT INTO {EVENTS} VALUES ('nobody', 1, 'X', '{{}}', '{{}}', 0, 1)",  # not a run
    ],
)
def test_database_refuses_inserts_that_are_not_appends(tmp_path: Path, sql: str) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    store.create_run("r", "task", events=[ev("A"), ev("B")])
    before = store.read("r")
    plain = sqlite3.connect(tmp_path / "log.db")  # recursive_triggers off, as in the sqlite3 shell
    with pytest.raises(sqlite3.IntegrityError, match="append-only: a fact goes right after"):
        plain.execute(sql)
    assert store.read("r") == before
    plain.execute(f"INSERT INTO {EVENTS} VALUES ('r', 3, 'C', '{{}}', '{{}}', 0, 1)")  # append
    plain.close()


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM runs WHERE run_id = 'r'",
        "UPDATE runs SET run_id = 'other' WHERE run_id = 'r'",
        "INSERT OR REPLACE INTO runs (run_id, task, status, created_at, updated_at, last_seq) "
        "VALUES ('r', 'forged', 'done', 0, 0, 0)",
    ],
)
def test_the_catalog_keeps_every_run_that_has_facts(tmp_path: Path, sql: str) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    store.create_run("r", "task", events=[ev("A")])
    store.create_run("empty", "task")
    plain = sqlite3.connect(tmp_path / "log.db", isolation_level=None)
    with pytest.raises(sqlite3.IntegrityError, match="runs: "):
        plain.execute(sql)
    assert (store.run("r").task, store.run("r").last_seq) == ("task", 1)
    plain.execute("DELETE FROM runs WHERE run_id = 'empty'")  # nothing of it is logged
    plain.close()
    assert [r.run_id for r in store.runs()] == ["r"]


def test_an_older_log_is_migrated_on_open_in_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("BEGIN")
    migrate(sqlite_utils.Database(conn), 0, upto=1)  # a log as the first release wrote it
    conn.execute("INSERT INTO runs VALUES ('r', 't', 'done', NULL, NULL, 0, 0, 1, '{}')")
    conn.execute("INSERT INTO events VALUES ('r', 1, 'A', '{}', '{}', 0, 1)")
    conn.execute("COMMIT")
    conn.close()
    plain = sqlite3.connect(path)  # recursive_triggers off, as in the sqlite3 shell
    plain.execute("INSERT OR REPLACE INTO events VALUES ('r', 1, 'FORGED', '{}', '{}', 0, 1)")
    plain.commit()
    plain.close()
    with SQLiteEventStore(path, create=False) as s:
        assert s._conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT1  # not format 2
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            s._conn.execute(
                f"INSERT OR REPLACE INTO {EVENTS} VALUES ('r', 1, 'X', '{{}}', '{{}}', 0, 1)"
            )
        assert [e.kind for e in s.read("r")] == ["FORGED"]  # what was done before stays done


def test_stale_writer_conflicts_and_writes_nothing(store: SQLiteEventStore) -> None:
    store.create_run("r", "task")
    store.append("r", 0, [ev("A")])
    with pytest.raises(ConcurrencyError, match="another writer appended first"):
        store.append("r", 0, [ev("B"), ev("C")])
    with pytest.raises(ConcurrencyError):
        store.append("r", 5, [ev("B")])
    assert [e.kind for e in store.read("r")] == ["A"]


def test_same_seq_primary_key_conflict(store: SQLiteEventStore) -> None:
    store.create_run("r", "task")
    store.append("r", 0, [ev("A")])
    with pytest.raises(sqlite3.IntegrityError):
        store._conn.execute(
            "INSERT INTO events (run_id, seq, kind, payload, meta, recorded_at, version) "
            "VALUES ('r', 1, 'X', '{}', '{}', 0, 1)"
        )


def test_runs_catalog_and_unknown_run(store: SQLiteEventStore) -> None:
    store.create_run("abc123", "first")
    store.create_run("abd999", "second", parent_id="abc123", branch_seq=7)
    assert [r.run_id for r in store.runs()] == ["abc123", "abd999"]
    child = store.run("abd999")
    assert (child.parent_id, child.branch_seq) == ("abc123", 7)
    with pytest.raises(UnknownRun, match="Closest ids: abc123"):
        store.run("abc124")
    with pytest.raises(UnknownRun):
        store.read("nope")
    with pytest.raises(ConcurrencyError, match="exists already"):
        store.create_run("abc123", "again")
    store.set_status("abc123", "done")
    assert store.run("abc123").status == "done"


def test_reopen_from_file(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    with SQLiteEventStore(path) as s:
        s.create_run("r", "task")
        s.append("r", 0, [ev("A"), ev("B")], status="done")
    with SQLiteEventStore(path, create=False) as again:
        assert [e.kind for e in again.read("r")] == ["A", "B"]
        assert again.run("r").status == "done"


def test_two_connections_on_one_run_conflict_loudly(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    a, b = SQLiteEventStore(path), SQLiteEventStore(path)
    a.create_run("r", "task")
    a.append("r", 0, [ev("A")])
    b.append("r", 1, [ev("B")])
    with pytest.raises(ConcurrencyError):
        a.append("r", 1, [ev("C")])
    assert [e.kind for e in a.read("r")] == ["A", "B"]


def test_concurrent_writers_from_threads_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    SQLiteEventStore(path).create_run("r", "task")
    failures: list[Exception] = []

    def writer(name: str) -> None:
        s = SQLiteEventStore(path)
        for _ in range(20):
            seq = s.run("r").last_seq
            try:
                s.append("r", seq, [ev(name), ev(name)])
            except ConcurrencyError as e:
                failures.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in "XY"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = SQLiteEventStore(path).read("r")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kinds = [e.kind for e in events]
    assert all(kinds[i] == kinds[i + 1] for i in range(0, len(kinds), 2))
    assert len(events) + 2 * len(failures) == 80


def test_schema_version_and_migrations_table(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    SQLiteEventStore(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT1
    cols = [r[1] for r in conn.execute("PRAGMA table_info(events)")]
    assert cols == ["run_id", "seq", "kind", "payload", "meta", "recorded_at", "version", "hash"]
    assert conn.execute("SELECT version, name FROM eventstore_migrations").fetchall() == [
        (version, name) for version, name, _ in MIGRATIONS if version <= FORMAT1
    ]
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match="newer than"):
        SQLiteEventStore(path)


def test_refuses_a_database_that_is_not_a_log(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(NotAnEventLog, match="not an agentsm event log"):
        SQLiteEventStore(other)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite database"):
        SQLiteEventStore(junk)
    with pytest.raises(NotAnEventLog, match="No database"):
        SQLiteEventStore(tmp_path / "missing.db", create=False)


def test_a_killed_writer_leaves_whole_transactions(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    SQLiteEventStore(path).create_run("r", "task")
    script = (
        "import os, sys\n"
        "from eventstore import SQLiteEventStore, NewEvent\n"
        f"s = SQLiteEventStore({str(path)!r})\n"
        "s.append('r', 0, [NewEvent('A', '{}'), NewEvent('B', '{}')])\n"
        "s._conn.execute('BEGIN IMMEDIATE')\n"
        "s._conn.execute(\"INSERT INTO events VALUES ('r', 3, 'C', '{}', '{}', 0, 1, NULL)\")\n"
        "os._exit(9)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert result.returncode == 9
    assert [e.kind for e in SQLiteEventStore(path).read("r")] == ["A", "B"]


# -- opening one file from several processes, and faults while creating it --------------------


def test_many_processes_opening_one_new_file_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    go = tmp_path / "go"
    script = (
        "import os, sys, time\n"
        "from eventstore import SQLiteEventStore\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.001)\n"
        f"s = SQLiteEventStore({str(path)!r})\n"
        "s.create_run(sys.argv[1], 'task')\n"
        "s.close()\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, f"r{i}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for i in range(24)
    ]
    try:
        go.touch()  # every process is past its imports or close to it: they open at once
        results = [p.communicate(timeout=120) for p in procs]
        failed = [err.decode() for p, (_, err) in zip(procs, results, strict=True) if p.returncode]
        assert failed == []
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    with SQLiteEventStore(path, create=False) as s:
        assert sorted(r.run_id for r in s.runs()) == sorted(f"r{i}" for i in range(24))
        assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_kill_while_creating_the_schema_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    script = (
        "import os\n"
        "from eventstore import SQLiteEventStore, migrations\n"
        "version, name, apply = migrations.MIGRATIONS[0]\n"
        "def dying(db):\n"
        "    apply(db)\n"
        "    os._exit(9)\n"
        "migrations.MIGRATIONS[0] = (version, name, dying)\n"
        f"SQLiteEventStore({str(path)!r})\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert result.returncode == 9, result.stderr
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    conn.close()
    with SQLiteEventStore(path) as s:  # the next open creates the log as if nothing happened
        s.create_run("r", "task")
        assert [r.run_id for r in s.runs()] == ["r"]


def _schema_of(path: Path) -> tuple[list[tuple[str, str]], str, int]:
    conn = sqlite3.connect(path)
    try:
        tables = conn.execute("SELECT type, name FROM sqlite_master ORDER BY name").fetchall()
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        return tables, mode, conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "schema",
    [
        "CREATE TABLE events (id INTEGER, what TEXT)",
        "CREATE TABLE customers (id INTEGER); PRAGMA user_version = 1",
        "CREATE TABLE runs (run_id TEXT); CREATE TABLE events (run_id TEXT, seq INTEGER)",
    ],
)
def test_a_foreign_database_is_refused_and_never_modified(tmp_path: Path, schema: str) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.executescript(schema)
    conn.close()
    before = _schema_of(other)
    content = other.read_bytes()
    for create in (True, False):
        with pytest.raises(NotAnEventLog, match="not an agentsm event log.*left untouched"):
            SQLiteEventStore(other, create=create)
    assert _schema_of(other) == before and before[1] == "delete"
    assert other.read_bytes() == content


def test_a_closed_log_is_one_file(tmp_path: Path) -> None:
    """Closing a store that wrote checkpoints its WAL: the database file alone holds every
    committed fact, so copying it alone copies the log."""
    path = tmp_path / "log.db"
    store = SQLiteEventStore(path)
    store.create_run("r", "task", events=[NewEvent("A", "{}", "{}", 1.0)], status="running")
    store.append("r", 1, [NewEvent("B", "{}", "{}", 2.0)], status="done")
    assert (tmp_path / "log.db-wal").stat().st_size > 0  # the facts are in the WAL now
    store.close()
    copy = tmp_path / "copy" / "log.db"
    copy.parent.mkdir()
    shutil.copyfile(path, copy)  # the file alone, without its -wal
    alone = SQLiteEventStore(copy, read_only=True)
    assert [e.kind for e in alone.read("r")] == ["A", "B"] and alone.run("r").status == "done"
    alone.close()


def test_a_program_that_never_closes_its_store_leaves_one_file(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    script = (
        "import sys; from eventstore import SQLiteEventStore, NewEvent\n"
        "s = SQLiteEventStore(sys.argv[1])\n"
        "s.create_run('r', 'task', events=[NewEvent('A', '{}', '{}', 1.0)], status='done')\n"
    )  # and exits without close(), as a quick script does
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=120)
    copy = tmp_path / "copy.db"
    shutil.copyfile(path, copy)
    alone = SQLiteEventStore(copy, read_only=True)
    assert [e.kind for e in alone.read("r")] == ["A"]
    alone.close()
