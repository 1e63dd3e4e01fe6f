"""Every write of the store is whole or absent: a run never exists without its first facts (live
runs, branch copies, imports), and a failed COMMIT is rolled back with the store still usable."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentsm import AgentBuilder, LlmResponse, MockLlmCaller
from eventstore import NewEvent, SQLiteEventStore, StoreError
from replay.branching import branch_run
from replay.transfer import export_run, import_runs

from .scenarios import LONG


@contextmanager
def commits_fail(store: SQLiteEventStore) -> Iterator[None]:
    """Make every COMMIT that inserted events fail in SQLite itself: each inserted event also
    inserts a row breaking a deferred foreign key, which SQLite checks only at COMMIT."""
    conn = store._conn
    table = "facts" if store.log_format == 2 else "events"
    conn.executescript(
        "PRAGMA foreign_keys = ON;"
        "CREATE TEMP TABLE parent (id INTEGER PRIMARY KEY);"
        "CREATE TEMP TABLE child (p INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);"
        f"CREATE TEMP TRIGGER poison AFTER INSERT ON main.{table} BEGIN "
        "INSERT INTO child VALUES (NEW.seq); END;"
    )
    try:
        yield
    finally:
        conn.executescript("DROP TRIGGER poison; DROP TABLE child; DROP TABLE parent;")


def ev(kind: str) -> NewEvent:
    return NewEvent(kind, "{}", "{}", 1.0)


def agent() -> AgentBuilder:
    return AgentBuilder("Say hello").llm(MockLlmCaller([LlmResponse.final_answer(LONG)]))


def test_create_run_with_first_events_in_one_transaction(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    record = store.create_run("r", "task", events=[ev("A"), ev("B")], status="running")
    assert (record.last_seq, record.status) == (2, "running")
    assert [e.kind for e in store.read("r")] == ["A", "B"]
    with pytest.raises(StoreError, match="exists already"):
        store.create_run("r", "again", events=[ev("C")])
    assert [e.kind for e in store.read("r")] == ["A", "B"] and store.run("r").task == "task"


def test_a_failed_commit_is_rolled_back_and_the_store_stays_usable(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    store.create_run("r", "task", events=[ev("A")])
    with commits_fail(store):
        with pytest.raises(StoreError, match="nothing was written.*FOREIGN KEY"):
            store.append("r", 1, [ev("B")], status="done")
        with pytest.raises(StoreError, match="nothing was written"):
            store.create_run("s", "task", events=[ev("A")])
        assert not store._conn.in_transaction
    assert [r.run_id for r in store.runs()] == ["r"]
    assert (store.run("r").last_seq, store.run("r").status) == (1, "created")
    assert store.append("r", 1, [ev("B")]) == 2  # usable again: no transaction left open
    assert [e.kind for e in store.read("r")] == ["A", "B"]


def test_a_run_whose_first_facts_fail_to_commit_leaves_no_empty_run(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    engine = agent().store(store).build()
    with commits_fail(store), pytest.raises(StoreError):
        engine.run()
    assert store.runs() == []
    done = agent().store(store).build()
    assert done.run() == LONG
    assert all(r.last_seq > 0 for r in store.runs())


def test_a_branch_copy_or_import_is_whole_or_absent(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    engine = agent().store(store).build()
    engine.run()
    lines = list(export_run(store, engine.run_id))
    with commits_fail(store):
        with pytest.raises(StoreError):
            branch_run(store, engine.run_id, 3, new_run_id="child")
        other = SQLiteEventStore(tmp_path / "other.db")
        with commits_fail(other), pytest.raises(StoreError):
            import_runs(other, lines)
    assert [r.run_id for r in store.runs()] == [engine.run_id]
    assert other.runs() == []
    assert import_runs(other, lines) == [engine.run_id]
    assert other.read(engine.run_id) == store.read(engine.run_id)


def test_runs_lists_a_file_holding_an_empty_run_left_by_an_older_release(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    store = SQLiteEventStore(db)
    store.create_run("empty", "crashed before its first facts")  # what a crash left before
    agent().store(store).run_id("whole").build().run()
    listing = main_output("--db", str(db), "runs")
    assert "empty" in listing and "whole" in listing


def main_output(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "replay", *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
