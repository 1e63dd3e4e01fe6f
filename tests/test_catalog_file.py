"""`agentsm runs` reads an up-to-date SQLite log with sqlite3 alone (`replay.cli.catalog_file`) and
shows exactly what the store shows: the same runs, in the same order, in every format and under
every filter; a log the store must open (older, not summarized, not a log) goes through it."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventstore import NewEvent, RunSummary, SQLiteEventStore
from eventstore.migrations import LATEST
from replay.cli import main
from replay.cli.catalog_file import CatalogFile, ListedRun

Capture = pytest.CaptureFixture[str]

FILTERS = [
    [],
    ["-n", "2"],
    ["-n", "0"],
    ["--status", "error"],
    ["--status", "interrupted"],
    ["--status", "running"],
    ["--status", "done", "--model", "gpt-4o"],
    ["--task", "ÄRGER"],
    ["--task", "nothing like it"],
    ["--since", "1h"],
    ["--since", "2999-01-01"],
]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Path]:
    """Runs of every kind the listing shows differently: done with a cost, failed, waiting, a
    branch, a sub-agent run, one driven by this process, one whose driver is gone, a task with
    letters beyond ASCII and an answer with a control character."""
    db = tmp_path / "runs.db"
    event = NewEvent("RunStarted", "{}", "{}", time.time())
    none = RunSummary()  # a summary with nothing to say yet
    with SQLiteEventStore(db) as store:
        store.create_run(
            "root",
            "Ärger im Büro: sort the invoices",
            events=[event],
            status="done",
            summary=RunSummary(3, 1200, 80, 0.0123, "gpt-4o", "Sorted \x1b[2J 12 invoices.", None),
        )
        store.create_run(
            "failed",
            "count the 日本語 words",
            events=[event],
            status="failed",
            summary=RunSummary(1, 10, 2, None, "mock", None, "max steps (1) reached"),
        )
        store.create_run("waits", "ask first", events=[event], status="waiting", summary=none)
        store.create_run(
            "branch", "Ärger im Büro", parent_id="root", branch_seq=4, events=[event], summary=none
        )
        store.create_run(
            "child",
            "look it up",
            parent_id="root",
            branch_seq=7,
            info={"subagent": {"parent": "root", "tool": "research"}},
            events=[event],
            status="done",
            summary=RunSummary(2, 50, 5, None, "mock", "found it", None),
        )
        store.create_run(
            "gone", "left by a dead worker", events=[event], status="running", summary=none
        )
    live = SQLiteEventStore(db)
    live.create_run("live", "going on", events=[event], status="running", summary=none, claim=True)
    yield db
    live.close()


def listed(capsys: Capture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    shown = capsys.readouterr()
    return code, shown.out, shown.err


@pytest.mark.parametrize("filters", FILTERS, ids=" ".join)
def test_the_listing_read_from_the_file_is_the_stores(
    filters: list[str], log: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = {}
    for how in ("file", "store"):
        with monkeypatch.context() as patched:
            if how == "file":  # the store is never opened
                patched.setattr(SQLiteEventStore, "__init__", None)
            else:
                patched.setattr(CatalogFile, "open", classmethod(lambda cls, db: None))
            outputs[how] = [
                listed(capsys, "runs", "--db", str(log), *filters, *fmt)
                for fmt in ([], ["--json"], ["--csv"])
            ]
    assert outputs["file"] == outputs["store"]
    assert all(code == 0 for code, _, _ in outputs["file"]), outputs["file"]


def test_interrupted_is_told_from_running_and_a_run_reads_back_as_the_stores(log: Path) -> None:
    catalog = CatalogFile.open(str(log))
    assert catalog is not None
    runs = {r.run_id: r for r in catalog.runs()}
    catalog.close()
    assert runs["gone"].shown_status == "interrupted" and runs["live"].shown_status == "running"
    assert runs["child"].info == {"subagent": {"parent": "root", "tool": "research"}}
    with SQLiteEventStore(log, read_only=True) as store:
        assert runs["root"].record() == store.run("root")
    assert repr(runs["root"]) == "ListedRun(run_id='root', status='done')"
    assert repr(runs["root"].summary) == "ListedSummary(steps=3, tokens=1280)"
    assert isinstance(runs["root"], ListedRun)


def test_a_log_the_store_must_open_is_left_to_it(tmp_path: Path, capsys: Capture) -> None:
    """Not a file, not a log, a newer schema, runs without a summary: the store opens those
    (and back-fills the summaries, or says what is wrong), so the listing is the same as
    before."""
    assert CatalogFile.open(str(tmp_path / "missing.db")) is None
    assert CatalogFile.open(str(tmp_path)) is None
    assert CatalogFile.open("postgresql://localhost/x") is None
    assert CatalogFile.open(":memory:") is None
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    assert CatalogFile.open(str(other)) is None
    code, _, err = listed(capsys, "runs", "--db", str(other))
    assert code == 2 and "not an agentsm event log" in err
    old = tmp_path / "old.db"
    with SQLiteEventStore(old) as store:
        store.create_run("r1", "a run", events=[NewEvent("RunStarted", "{}", "{}", 1.0)])
    with sqlite3.connect(old) as conn:  # as a release before the summaries left it
        conn.execute("UPDATE runs SET steps = NULL")
    conn.close()
    assert CatalogFile.open(str(old)) is None
    code, out, _ = listed(capsys, "runs", "--db", str(old))
    assert code == 0 and "r1" in out
    catalog = CatalogFile.open(str(old))  # back-filled by the store: now read from the file
    assert catalog is not None and [r.run_id for r in catalog.runs()] == ["r1"]
    catalog.close()
    with sqlite3.connect(old) as conn:  # an older schema with the same catalog: read as is
        conn.execute(f"PRAGMA user_version = {LATEST - 1}")
    conn.close()
    catalog = CatalogFile.open(str(old))
    assert catalog is not None and [r.run_id for r in catalog.runs()] == ["r1"]
    catalog.close()
    with sqlite3.connect(old) as conn:  # as a later release may leave it
        conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.close()
    assert CatalogFile.open(str(old)) is None
    code, _, err = listed(capsys, "runs", "--db", str(old))
    assert code == 2 and "Upgrade agentsm to read it" in err
