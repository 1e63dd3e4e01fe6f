"""Full-text search finds every fact of a format-2 log, also those a row carries after its first
(a transition, a step's start: `NewEvent.rides`), with the same results as format 1 for the same
run: indexed or read one by one, filtered by kind, after `agentsm migrate`, and in a log whose
index numbered rows instead of facts."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller, ToolCall, tool
from eventstore import NewEvent, SQLiteEventStore, sqlite_format2
from replay.cli import main

LONG = "The answer, which is long enough to be accepted: Paris."
QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("LlmToolCall", {}),  # only in Transitioned facts, which ride in format 2
    ("Observing", {}),
    ("Planning", {"kinds": ["Transitioned"]}),
    ("LlmParallelToolCalls ParallelActing", {}),
    ("capital", {}),
    ("cap*", {"limit": 3}),
    ("Lyon", {"kinds": ["ToolExecuted", "Transitioned"]}),
    ("pLyon", {"kinds": ["LlmResponded", "StepStarted"]}),
]


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city} is a capital with many museums"


def record(store: SQLiteEventStore, run_id: str = "r") -> None:
    """A run of three plan-act steps (the last with two calls in parallel), then an answer;
    every id fixed, so that two recordings hold the same text."""
    script = [LlmResponse.tool_call("lookup", {"city": f"c{n}"}, id=f"call{n}") for n in range(2)]
    calls = [ToolCall(name="lookup", args={"city": c}, id=f"p{c}") for c in ("Lyon", "Nice")]
    script += [LlmResponse.tool_calls(calls), LlmResponse.final_answer(LONG)]
    builder = AgentBuilder("Find the capital").llm(MockLlmCaller(script))
    config = AgentConfig(reflect_every_n_steps=0, max_steps=6)
    builder.tool(lookup).config(config).store(store).run_id(run_id).build().run()


def results(store: SQLiteEventStore) -> list[list[tuple[str, int, str, str]]]:
    return [store.search(text, **kw) for text, kw in QUERIES]


def riders(db: Path) -> list[int]:
    """The seqs of the facts a format-2 log keeps in a row after its first."""
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT seq, last FROM facts").fetchall()
    conn.close()
    return [seq for first, last in rows for seq in range(first + 1, last + 1)]


@pytest.fixture
def logs(tmp_path: Path) -> dict[int, Path]:
    """The same run recorded in a log of each format."""
    paths = {}
    for log_format in (1, 2):
        paths[log_format] = tmp_path / f"format{log_format}.db"
        with SQLiteEventStore(paths[log_format], log_format=log_format) as store:
            record(store)
    return paths


@pytest.mark.parametrize("log_format", [1, 2])
def test_a_word_only_a_rider_holds_finds_that_fact(logs: dict[int, Path], log_format: int) -> None:
    with SQLiteEventStore(logs[log_format]) as store:
        transitions = {e.seq for e in store.read("r") if '"LlmToolCall"' in e.payload}
        assert len(transitions) == 2  # the two steps of one tool call each
        hits = store.search("LlmToolCall")
        assert {h[1] for h in hits} == transitions
        assert all(h[:3] == ("r", h[1], "Transitioned") and "[LlmToolCall]" in h[3] for h in hits)
        assert store.unindexed() == 0
    if log_format == 2:
        assert transitions <= set(riders(logs[2]))  # carried in the row of the fact before


def test_both_formats_give_the_same_results(logs: dict[int, Path]) -> None:
    with SQLiteEventStore(logs[1]) as one, SQLiteEventStore(logs[2]) as two:
        assert [e.payload for e in one.read("r")] == [e.payload for e in two.read("r")]
        assert one.unindexed() == two.unindexed() == len(two.read("r"))  # facts, not rows
        found = results(one)
        assert all(found) and results(two) == found
        assert one.unindexed() == two.unindexed() == 0


def test_facts_not_indexed_yet_are_read_one_by_one_alike(logs: dict[int, Path]) -> None:
    with (
        SQLiteEventStore(logs[1], read_only=True) as one,  # no search has indexed them
        SQLiteEventStore(logs[2], read_only=True) as two,
    ):
        assert two.unindexed() == one.unindexed() == len(two.read("r"))
        found = results(one)
        assert all(found) and results(two) == found
        transitions = [e.seq for e in two.read("r") if '"LlmToolCall"' in e.payload]
        assert sorted(h[1] for h in two.search("LlmToolCall")) == transitions


def test_facts_appended_after_a_search_are_found_on_the_next(logs: dict[int, Path]) -> None:
    with SQLiteEventStore(logs[2]) as store:
        store.search("capital")
        last = store.run("r").last_seq
        meta = '{"state":"Done","step":4}'
        store.append(
            "r",
            last,
            [
                NewEvent("Note", '{"text":"zebra first"}', meta, 9.0),
                NewEvent("Transitioned", '{"event":"Zebra","to_state":"Done"}', meta, 9.0, True),
            ],
        )
        assert store.unindexed() == 2
        assert [(h[1], h[2]) for h in store.search("zebra")] == [
            (last + 2, "Transitioned"),
            (last + 1, "Note"),
        ]
        assert store.search("zebra", kinds=["Transitioned"])[0][1] == last + 2


def test_a_migrated_log_finds_the_same_facts(
    logs: dict[int, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    with SQLiteEventStore(logs[1]) as one:
        before = results(one)  # indexed in format 1: the rowids of its events
    assert main(["--db", str(logs[1]), "migrate"]) == 0
    capsys.readouterr()
    with SQLiteEventStore(logs[1], create=False) as store:
        assert store.log_format == 2
        assert store.unindexed() == len(store.read("r"))  # its index is made again
        assert results(store) == before
        assert store.unindexed() == 0
        record(store, "new")  # rows of several facts after the migrated ones
        assert set(riders(logs[1]))
        assert {h[0] for h in store.search("LlmToolCall")} == {"r", "new"}
        assert len(store.search("LlmToolCall")) == 4


def test_an_index_that_numbered_rows_is_made_again(logs: dict[int, Path]) -> None:
    with SQLiteEventStore(logs[2]) as store:
        expected = results(store)
    conn = sqlite3.connect(logs[2])  # the index as a development build of format 2 made it
    conn.execute("INSERT INTO events_words (events_words) VALUES ('delete-all')")
    conn.execute(
        "INSERT INTO events_words (rowid, words) SELECT id, 'capital ' || payload FROM facts"
    )
    conn.execute("UPDATE events_indexed SET upto = (SELECT MAX(id) FROM facts)")
    conn.commit()
    conn.close()
    with SQLiteEventStore(logs[2], read_only=True) as reader:  # not used: read one by one
        assert reader.unindexed() == len(reader.read("r"))
        assert sorted(reader.search("LlmToolCall")) == sorted(expected[0])
    with SQLiteEventStore(logs[2]) as store:
        assert results(store) == expected
        assert store.unindexed() == 0


def test_a_row_carries_at_most_max_riders_and_each_fact_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_format2, "MAX_RIDERS", 2)
    meta = '{"state":"Planning","step":1}'
    events = [NewEvent("RunStarted", '{"task":"t"}', meta, 1.0)]
    events += [
        NewEvent("Transitioned", f'{{"event":"E{n}","to_state":"S"}}', meta, 1.0, rides=True)
        for n in range(5)
    ]
    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as store:
        store.create_run("r", "t", events=events)
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT seq, last FROM facts").fetchall() == [(1, 3), (4, 6)]
        conn.close()
        assert store.verify("r").ok and [e.payload for e in store.read("r")][1:] == [
            e.payload for e in events[1:]
        ]
        assert [h[1] for h in store.search("E4")] == [6]
        assert sorted(h[1] for h in store.search("S", kinds=["Transitioned"])) == [2, 3, 4, 5, 6]
