"""A run imported or copied into a format-2 log is packed as its recording was: the facts that
follow from the fact before them (`agentsm.recorder.RIDERS`, at that fact's time) ride in its
row, so the run takes as many rows as where it was recorded, with every hash kept and the run
replaying identical."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller, ToolCall, tool
from agentsm.recorder import RIDERS
from eventstore import NewEvent, SQLiteEventStore
from eventstore.records import with_riders
from replay import copy_runs, export_run, import_runs, replay_run

from .test_format2 import tamper

LONG = "The answer, which is long enough to be accepted: Paris."


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city} is a capital with many museums"


def record(store: SQLiteEventStore, run_id: str = "r", steps: int = 6) -> None:
    """A run of `steps` plan-act steps (the last with two calls in parallel), then an answer."""
    script = [
        LlmResponse.tool_call("lookup", {"city": f"c{n}"}, id=f"k{n}") for n in range(steps - 1)
    ]
    calls = [ToolCall(name="lookup", args={"city": c}, id=f"p{c}") for c in ("Lyon", "Nice")]
    script += [LlmResponse.tool_calls(calls), LlmResponse.final_answer(LONG)]
    config = AgentConfig(reflect_every_n_steps=0, max_steps=steps + 2)
    builder = AgentBuilder("Find the capital").llm(MockLlmCaller(script)).tool(lookup)
    builder.config(config).store(store).run_id(run_id).build().run()


def rows_of(store: SQLiteEventStore, run_id: str) -> int:
    """How many rows of `facts` hold the run's facts."""
    conn = sqlite3.connect(store.path)
    try:
        sql = "SELECT COUNT(*) FROM facts f JOIN runs r ON r.key = f.run WHERE r.run_id = ?"
        return int(conn.execute(sql, (run_id,)).fetchone()[0])
    finally:
        conn.close()


def shape_of(store: SQLiteEventStore, run_id: str) -> tuple[int, int]:
    """How many of the run's rows hold their envelope's state in a column, and the length of
    the text of their payloads and the rest of their envelopes (their riders name kinds and
    states by codes, which another log may number otherwise)."""
    conn = sqlite3.connect(store.path)
    try:
        sql = (
            "SELECT COUNT(f.state), SUM(LENGTH(f.payload) + COALESCE(LENGTH(f.meta), 0)) "
            "FROM facts f JOIN runs r ON r.key = f.run WHERE r.run_id = ?"
        )
        found = conn.execute(sql, (run_id,)).fetchone()
        return int(found[0]), int(found[1])
    finally:
        conn.close()


def same_run(source: SQLiteEventStore, target: SQLiteEventStore, run_id: str = "r") -> None:
    assert target.log_format == 2 and rows_of(target, run_id) == rows_of(source, run_id)
    assert shape_of(target, run_id) == shape_of(source, run_id)  # the envelopes in columns
    assert rows_of(target, run_id) < len(target.read(run_id)) / 1.5  # riders packed
    assert target.read(run_id) == source.read(run_id)  # every fact and hash as recorded
    report = target.verify(run_id)
    assert report.ok and report.head == source.verify(run_id).head
    assert replay_run(target, run_id).identical


@pytest.fixture
def source(tmp_path: Path) -> Iterator[SQLiteEventStore]:
    store = SQLiteEventStore(tmp_path / "source.db")
    record(store)
    yield store
    store.close()


def test_an_imported_run_takes_the_rows_it_took_where_it_was_recorded(
    source: SQLiteEventStore, tmp_path: Path
) -> None:
    with SQLiteEventStore(tmp_path / "target.db") as target:
        record(target, "already-there")  # the run gets another key
        assert import_runs(target, export_run(source, "r")) == ["r"]
        same_run(source, target)
        assert import_runs(target, export_run(source, "r")) == ["r"]  # again: left as it is


def test_a_copied_run_takes_the_rows_it_took_where_it_was_recorded(
    source: SQLiteEventStore, tmp_path: Path
) -> None:
    with SQLiteEventStore(tmp_path / "target.db") as target:
        assert copy_runs(source, target).copied == ("r",)
        same_run(source, target)


def test_a_run_of_a_format1_log_copied_to_format_2_is_packed_as_if_recorded_there(
    source: SQLiteEventStore, tmp_path: Path
) -> None:
    with (
        SQLiteEventStore(tmp_path / "old.db", log_format=1) as old,
        SQLiteEventStore(tmp_path / "new.db") as new,
    ):
        record(old)
        copy_runs(old, new)
        assert rows_of(new, "r") == rows_of(source, "r")  # the same run, recorded in format 2
        assert new.read("r") == old.read("r") and new.verify("r").ok
        assert replay_run(new, "r").identical


def test_only_a_rider_kind_at_the_time_of_the_fact_before_rides() -> None:
    events = [
        NewEvent("Transitioned", "{}", recorded_at=1.0),  # first: follows nothing
        NewEvent("LlmResponded", "{}", recorded_at=1.0),  # not a rider kind
        NewEvent("Transitioned", "{}", recorded_at=1.0),
        NewEvent("StepStarted", "{}", recorded_at=1.0),  # riders follow riders
        NewEvent("ToolExecuted", "{}", recorded_at=2.0),
        NewEvent("Transitioned", "{}", recorded_at=2.5),  # at a time of its own
    ]
    assert [e.rides for e in with_riders(events, RIDERS)] == [False] * 2 + [True] * 2 + [False] * 2
    assert with_riders(events, frozenset()) == events


def test_a_branch_copies_the_parents_facts_in_the_rows_they_took(
    source: SQLiteEventStore,
) -> None:
    from replay import branch_run

    last_answer = max(e.seq for e in source.read("r") if e.kind == "LlmResponded")
    branch = branch_run(source, "r", last_answer, llm_response=LlmResponse.final_answer(LONG))
    copied = source.run(branch.run_id).branch_seq
    assert copied is not None and copied > 20
    conn = sqlite3.connect(source.path)
    try:
        sql = (
            "SELECT COUNT(*) FROM facts f JOIN runs r ON r.key = f.run "
            "WHERE r.run_id = ? AND f.seq <= ?"
        )
        rows = [conn.execute(sql, (run, copied)).fetchone()[0] for run in ("r", branch.run_id)]
    finally:
        conn.close()
    assert rows[0] == rows[1] < copied / 1.5  # the copied prefix, packed alike
    assert source.verify(branch.run_id).ok
    assert replay_run(source, branch.run_id).identical


def test_a_long_append_keeps_a_hash_every_so_many_rows(
    source: SQLiteEventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import writes a run in one append: it keeps the hash of every `KEPT_EVERY`-th row
    too, so that a read from its middle checks from there, and an edit is still found."""
    from eventstore import sqlite_format2

    monkeypatch.setattr(sqlite_format2, "KEPT_EVERY", 4)
    db = tmp_path / "target.db"
    with SQLiteEventStore(db) as target:
        import_runs(target, export_run(source, "r"))
        same_run(source, target)
        rows = rows_of(target, "r")
        conn = sqlite3.connect(db)
        kept = [
            seq
            for (seq,) in conn.execute("SELECT last FROM facts WHERE hash IS NOT NULL ORDER BY seq")
        ]
        conn.close()
        assert len(kept) == rows // 4 + (rows % 4 != 0)
        middle = kept[len(kept) // 2]
        assert target.read("r", after=middle) == source.read("r", after=middle)
        assert target.read("r", upto=middle + 2) == source.read("r", upto=middle + 2)
    tamper(
        db,
        "UPDATE facts SET payload = payload || ' ' "
        f"WHERE seq = (SELECT MAX(seq) FROM facts WHERE last < {middle})",
    )
    with SQLiteEventStore(db) as target:
        report = target.verify("r")
        assert report.broken is not None and report.broken.seq <= middle


def test_an_envelope_with_an_escaped_lone_surrogate_imports_intact(
    source: SQLiteEventStore, tmp_path: Path
) -> None:
    """Valid JSON text that escapes a lone surrogate (as json.dumps writes it) is written back
    escaped: SQLite cannot hold the raw surrogate."""
    events = source.read("r")
    odd = [
        NewEvent(
            e.kind,
            e.payload,
            json.dumps(
                {**e.meta, "metrics": {"note": "\udc80"}} if e.seq == len(events) else e.meta
            ),
            e.recorded_at,
            e.version,
        )
        for e in events
    ]
    source.create_run("odd", "Find the capital", events=odd, status="done")
    with SQLiteEventStore(tmp_path / "target.db") as target:
        assert import_runs(target, export_run(source, "odd")) == ["odd"]
        assert target.read("odd") == source.read("odd") and target.verify("odd").ok
