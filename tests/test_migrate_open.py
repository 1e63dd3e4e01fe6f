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

    assert reader.read(before) == read_before  # the first call after it a read: as it was
    chained = writer.read_chained(before)  # the writer's first call after it: the same
    assert [(r[0], r[1], r[3], r[-1]) for r in chained] == [
        (e.seq, e.kind, e.payload, e.hash) for e in read_before
    ]
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


def test_writes_made_for_format_1_that_a_conversion_overtook_are_written_in_format_2(
    tmp_path: Path,
) -> None:
    """Appends made while another process converts the log (its transaction open) wait for
    it, then are written as the log is now: nothing refused, nothing lost, chains intact."""
    import sqlite3
    import threading
    import time

    import sqlite_utils

    from eventstore import NewEvent
    from eventstore.migrations import migrate

    meta = '{"state":"Planning","step":1}'
    db = tmp_path / "old.db"
    store = SQLiteEventStore(db, log_format=1, busy_timeout=20)
    for run in ("a", "b"):
        store.create_run(run, "t", events=[NewEvent("RunStarted", '{"task":"t"}', meta, 1.0)])
    converter = sqlite3.connect(db, isolation_level=None)
    converter.execute("BEGIN IMMEDIATE")  # the conversion, as upgrade() makes it, under way
    failed: list[BaseException] = []

    def append(run: str) -> None:
        try:
            store.append(run, 1, [NewEvent("Said", '{"text":"x"}', meta, 2.0)])
        except BaseException as e:
            failed.append(e)

    threads = [threading.Thread(target=append, args=(run,)) for run in ("a", "b")]
    for thread in threads:
        thread.start()
    time.sleep(0.3)  # both appends made and waiting for the lock
    version = int(converter.execute("PRAGMA user_version").fetchone()[0])
    migrate(sqlite_utils.Database(converter), version)
    converter.execute("COMMIT")
    converter.close()
    for thread in threads:
        thread.join()
    assert failed == []
    assert store.log_format == 2
    for run in ("a", "b"):
        assert [e.kind for e in store.read(run)] == ["RunStarted", "Said"]
        assert store.verify(run).ok
    store.close()
