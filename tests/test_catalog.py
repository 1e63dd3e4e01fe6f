"""The run catalog: summaries written with the facts read the same as a fold, listing filters,
id lookups through the index, and logs of older releases back-filled once."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentFailed, HumanInputRequired
from agentsm.catalog import cost_of, summary_of, summary_of_facts
from agentsm.trace import decode
from eventstore import (
    AmbiguousRunId,
    ConcurrencyError,
    NewEvent,
    RunSummary,
    SQLiteEventStore,
    UnknownRun,
)
from replay.copying import copy_runs
from replay.source import open_store
from replay.transfer import export_run, import_runs
from tests.backends import Backend
from tests.scenarios import SCENARIOS

LEGACY = Path(__file__).parent / "fixtures" / "legacy"


def folded(store: SQLiteEventStore, run_id: str) -> RunSummary:
    return summary_of_facts(decode(e) for e in store.read(run_id))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_catalog_summary_reads_the_same_as_the_fold(name: str, tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    engine = SCENARIOS[name]().store(store).build()
    try:
        engine.run()
    except (AgentFailed, HumanInputRequired):
        pass
    record = store.run(engine.run_id)
    assert record.summary == folded(store, engine.run_id) == summary_of(engine.memory)
    assert record.summary.steps == engine.memory.step >= 1
    assert record.summary.tokens == engine.memory.total_usage.total_tokens
    if engine.memory.final_answer:
        assert record.summary.answer == engine.memory.final_answer[:200]
    if engine.memory.error:
        assert record.summary.error == engine.memory.error[:200]


def test_summary_text_is_cut_at_200_characters_and_priced_models_get_a_cost() -> None:
    assert cost_of("gpt-4o-mini-2024-07-18", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert cost_of("gpt-4o", 1_000_000, 0) == pytest.approx(2.5)
    assert cost_of("my-own-model", 10, 10) is None and cost_of(None, 1, 1) is None
    store = SQLiteEventStore()
    store.create_run("r", "t", summary=RunSummary(answer="a" * 500, error="e" * 300))
    assert store.run("r").summary.answer == "a" * 200
    assert store.run("r").summary.error == "e" * 200


def _event() -> NewEvent:
    return NewEvent("Noted", "{}", recorded_at=1.0)


def test_a_refused_append_leaves_the_summary_as_it_was() -> None:
    store = SQLiteEventStore()
    store.create_run("r", "t", events=[_event()], summary=RunSummary(steps=1))
    store.append("r", 1, [_event()], summary=RunSummary(steps=2))
    with pytest.raises(ConcurrencyError):
        store.append("r", 1, [_event()], summary=RunSummary(steps=9))
    store.append("r", 2, [_event()])  # no summary given: the one there stays
    assert store.run("r").summary == RunSummary(steps=2)


def _catalog() -> SQLiteEventStore:
    store = SQLiteEventStore()
    rows = [
        ("a1", "Find the capital of France", "done", 100.0, "gpt-4o"),
        ("a2", "Book a flight", "failed", 200.0, "gpt-4o-mini"),
        ("b1", "find a FRENCH restaurant", "failed", 300.0, "gpt-4o"),
        ("b2", "Pay the rent", "waiting", 400.0, None),
    ]
    for run_id, task, status, at, model in rows:
        store.create_run(
            run_id,
            task,
            created_at=at,
            events=[NewEvent("Noted", "{}", recorded_at=at + 5)],
            status=status,
            summary=RunSummary(steps=1, model=model),
        )
    return store


def test_runs_filters_by_status_model_task_and_time_and_pages() -> None:
    store = _catalog()

    def ids(**filters: object) -> list[str]:
        return [r.run_id for r in store.runs(**filters)]  # type: ignore[arg-type]

    assert ids() == ["a1", "a2", "b1", "b2"]
    assert ids(status="failed") == ["a2", "b1"]
    assert ids(model="gpt-4o") == ["a1", "b1"]
    assert ids(task="french") == ["b1"] and ids(task="FIND") == ["a1", "b1"]
    assert ids(since=206.0) == ["b1", "b2"]  # compared with the last fact's time
    assert ids(newest_first=True, limit=2) == ["b2", "b1"]
    assert ids(status="failed", model="gpt-4o", task="fr", since=300.0, limit=50) == ["b1"]
    assert ids(task="50%_") == [] and ids(limit=0) == []


def test_resolve_finds_exact_ids_and_unique_prefixes_and_names_the_others() -> None:
    store = _catalog()
    assert store.resolve("a1") == "a1" and store.resolve("b2") == "b2"
    store.create_run("a", "t")
    assert store.resolve("a") == "a"  # an exact id wins over the ids it starts
    with pytest.raises(AmbiguousRunId) as ambiguous:
        store.resolve("b")
    assert "b1" in str(ambiguous.value) and "b2" in str(ambiguous.value)
    with pytest.raises(UnknownRun) as unknown:
        store.resolve("a3")
    assert not isinstance(unknown.value, AmbiguousRunId) and "Closest ids: a" in str(unknown.value)
    with pytest.raises(UnknownRun):
        store.resolve("")


def test_the_migration_adds_the_summary_columns_and_the_listing_indexes(tmp_path: Path) -> None:
    SQLiteEventStore(tmp_path / "log.db").close()
    conn = sqlite3.connect(tmp_path / "log.db")
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    assert {"steps", "input_tokens", "output_tokens", "cost", "model", "answer", "error"} <= columns
    indexed = {
        tuple(r[2] for r in conn.execute(f"PRAGMA index_info({name!r})"))
        for (name,) in conn.execute("SELECT name FROM pragma_index_list('runs')")
    }
    assert {("status", "updated_at"), ("created_at",), ("model",), ("run_id",)} <= indexed
    plan = " ".join(
        r[3]
        for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT run_id FROM runs WHERE run_id >= 'a' AND run_id < 'b'"
        )
    )
    assert "USING" in plan and "INDEX" in plan  # a prefix lookup is a range scan of the index


def test_a_legacy_log_is_migrated_and_back_filled_once_when_opened(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY / "legacy-0.1.0.db", db)
    expected = json.loads((LEGACY / "expected.json").read_text())
    store = open_store(str(db), read_only=True)  # what every inspection command does
    assert isinstance(store, SQLiteEventStore) and store.read_only
    for record in store.runs():
        assert record.summary == folded(store, record.run_id)
        assert record.summary.steps == expected[record.run_id]["step"]
        assert record.summary.tokens == expected[record.run_id]["tokens"]
    store.close()
    with SQLiteEventStore(db, create=False) as again:
        assert again.unsummarized() == []  # folded once, kept


def test_a_legacy_log_the_user_may_not_write_is_listed_without_summaries(tmp_path: Path) -> None:
    with SQLiteEventStore(LEGACY / "legacy-0.1.0.db", read_only=True) as store:
        records = store.runs()
        assert records and all(r.summary == RunSummary() for r in records)
        assert store.unsummarized() == [r.run_id for r in records]
        assert store.runs(model="gpt-4o") == []


def test_search_indexes_what_was_appended_since_the_last_search(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    store.create_run("r", "t", events=[NewEvent("Said", '{"text": "first zebra"}')])
    with pytest.raises(ConcurrencyError):
        store.append("r", 0, [NewEvent("Said", '{"text": "refused okapi"}')])
    assert [h[1] for h in store.search("zebra")] == [1] and store.unindexed() == 0
    store.append("r", 1, [NewEvent("Said", '{"text": "second zebra"}')])
    reader = SQLiteEventStore(tmp_path / "log.db", read_only=True)
    assert reader.unindexed() == 1  # the second fact is read as it is
    assert sorted(h[1] for h in reader.search("zebra")) == [1, 2]
    assert store.search("okapi") == []  # a refused append left nothing to index
    assert [(h[1], h[3]) for h in store.search("zebra second")] == [(2, "[second] [zebra]")]
    assert reader.unindexed() == 0 and sorted(h[1] for h in reader.search("zebra")) == [1, 2]
    assert store.index_for_search() == 0  # each event is indexed once
    assert sorted(h[1] for h in store.search("zebra", kinds=["Said"])) == [1, 2]
    assert store.search("zebra", kinds=["Other"]) == [] and store.search('"') == []


def test_the_first_search_indexes_the_facts_logged_before_the_index(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY / "legacy-0.1.0.db", db)
    with SQLiteEventStore(db, create=False) as store:
        hits = store.search("accepted", kinds=["FinalAnswerProduced"])
    expected = json.loads((LEGACY / "expected.json").read_text())
    answered = [run_id for run_id, run in expected.items() if run["final_answer"]]
    assert "answer" in {h[0] for h in hits} and {h[0] for h in hits} <= set(answered)


class SummaryWatch(SQLiteEventStore):
    """The real store, checking after each commit that the catalog reads as the fold."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.sent: list[RunSummary | None] = []

    async def append_async(self, run_id: str, expected_seq: int, events: Any, **kw: Any) -> int:
        self.sent.append(kw.get("summary"))
        seq = await super().append_async(run_id, expected_seq, events, **kw)
        assert self.run(run_id).summary == folded(self, run_id)
        return seq


def test_a_commit_that_changes_nothing_the_catalog_shows_writes_no_summary(
    tmp_path: Path,
) -> None:
    store = SummaryWatch(tmp_path / "log.db")
    with pytest.raises(AgentFailed):  # it stops at its step limit
        SCENARIOS["max_steps"]().store(store).build().run()
    assert None in store.sent and any(s is not None for s in store.sent)
    assert store.run(store.runs()[0].run_id).summary == folded(store, store.runs()[0].run_id)


def log_without_summaries(path: Path) -> tuple[str, RunSummary]:
    """A log whose catalog keeps no summary of its one run (as an older release's), and the
    summary that run's facts fold to."""
    with SQLiteEventStore(path) as store:
        engine = SCENARIOS["parallel"]().store(store).build()
        engine.run()
        summary = store.run(engine.run_id).summary
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "UPDATE runs SET steps = NULL, input_tokens = NULL, output_tokens = NULL, "
            "cost = NULL, model = NULL, answer = NULL, error = NULL"
        )
    return engine.run_id, summary


@pytest.mark.parametrize("how", ["import", "copy"])
def test_runs_brought_without_summaries_are_back_filled_on_every_backend(
    backend: Backend, how: str, tmp_path: Path
) -> None:
    run_id, summary = log_without_summaries(tmp_path / "old.db")
    assert summary.steps and summary.tokens and summary.answer  # what the listing should show
    with SQLiteEventStore(tmp_path / "old.db", create=False) as old:
        assert old.run(run_id).summary == RunSummary() and old.unsummarized() == [run_id]
        store = backend.open()
        if how == "import":
            lines = list(export_run(old, run_id))
            assert "summary" not in json.loads(lines[0])  # the export has none to give
            import_runs(store, lines)
        else:
            copy_runs(old, store)
    listed = {r.run_id: r.summary for r in store.runs()}
    assert listed[run_id] == summary
    assert store.unsummarized() == []  # type: ignore[attr-defined]


def test_a_log_opened_for_writing_back_fills_what_it_lacks_on_every_backend(
    backend: Backend, tmp_path: Path
) -> None:
    if not backend.shared:
        pytest.skip("SQLite in memory is one store: nothing reopens it")
    run_id, summary = log_without_summaries(tmp_path / "old.db")
    with SQLiteEventStore(tmp_path / "old.db", create=False) as old:
        lines = list(export_run(old, run_id))
    store = backend.open()
    import_runs(store, lines)
    backend.execute("UPDATE runs SET steps = NULL")  # imported by a release that left it so
    assert store.run(run_id).summary == RunSummary()
    if backend.name == "postgresql":  # read-only, it writes nothing (SQLite's may: open_store)
        with closing(open_store(backend.url, read_only=True)) as reader:
            assert reader.run(run_id).summary == RunSummary()
    with closing(open_store(backend.url)) as writer:
        assert writer.run(run_id).summary == summary


def test_bedrock_model_ids_are_priced_by_the_models_own_name() -> None:
    from agentsm.catalog import cost_of

    direct = cost_of("claude-sonnet-4-20250514", 1_000_000, 1_000_000, 1_000_000, 1_000_000)
    hosted = cost_of(
        "us.anthropic.claude-sonnet-4-20250514-v1:0", 1_000_000, 1_000_000, 1_000_000, 1_000_000
    )
    assert direct == hosted == pytest.approx(3.00 + 15.00 + 0.30 + 3.75)  # cache reads, writes
    assert cost_of("amazon.nova-micro-v1:0", 1_000_000, 1_000_000) == pytest.approx(0.175)
    assert cost_of("gemini-2.5-flash", 1_000_000, 0) == pytest.approx(0.30)
    assert cost_of("us.meta.llama3-70b-instruct-v1:0", 1_000, 1_000) is None  # no price: none
