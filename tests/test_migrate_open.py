"""A log converted to format 2 (`agentsm migrate`, `upgrade`) while other stores have it open:
they read and write it as it now is, nothing lost, every chain intact."""

from __future__ import annotations

from pathlib import Path

from agentsm import AgentBuilder, AgentMemory, LlmResponse, MockLlmCaller
from eventstore import SQLiteEventStore
from replay import replay_run

ANSWER = "An answer long enough to be accepted by the agent."


def answered(store: SQLiteEventStore, task: str) -> str:
    engine = (
        AgentBuilder(task)
        .llm(MockLlmCaller([LlmResponse.final_answer(ANSWER)]))
        .store(store)
        .build()
    )
    assert engine.run() == ANSWER
    return engine.run_id


def test_stores_open_on_a_log_another_converts_go_on_in_format_2(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    writer = SQLiteEventStore(db, log_format=1)
    before = answered(writer, "before")
    reader = SQLiteEventStore(db, read_only=True)
    assert reader.log_format == writer.log_format == 1
    read_before = reader.read(before)

    with SQLiteEventStore(db) as other:  # as agentsm migrate does, in another process
        assert other.upgrade() == 2

    assert reader.log_format == writer.log_format == 2
    assert reader.read(before) == writer.read(before) == read_before  # every hash as it was
    assert all(isinstance(e.hash, str) for e in reader.read(before))
    assert reader.verify(before).ok and writer.verify(before).ok
    assert AgentMemory.rebuild(reader, before)[0].final_answer == ANSWER
    after = answered(writer, "after")  # written in format 2 by the store opened in format 1
    assert reader.verify(after).ok and replay_run(reader, after).identical
    assert replay_run(writer, before).identical
    assert {r.run_id for r in reader.runs()} == {before, after}
    writer.close()
    reader.close()
    with SQLiteEventStore(db) as again:
        assert again.log_format == 2 and all(again.verify(r.run_id).ok for r in again.runs())
