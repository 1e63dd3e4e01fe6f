"""One contract for every store backend: SQLite file, SQLite in memory, PostgreSQL.

Each test runs on each backend (`backend` / `store` fixtures in conftest.py); what a backend does
not share between two stores (SQLite in memory) or does not have yet is said where it is skipped.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sqlite3
import threading
import time
from typing import Any

import psycopg
import pytest

from eventstore import (
    AmbiguousRunId,
    AsyncAppend,
    AsyncDrive,
    ConcurrencyError,
    EventStore,
    NewEvent,
    RunInUse,
    RunSummary,
    StoreError,
    UnknownRun,
)

from .backends import Backend

DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error)


def ev(kind: str, n: int = 0, at: float = 1.0) -> NewEvent:
    return NewEvent(kind, f'{{"n": {n}, "text": "caf\\u00e9 \\ud83d\\ude00"}}', '{"by": "x"}', at)


def kinds(store: EventStore, run_id: str) -> list[str]:
    return [e.kind for e in store.read(run_id)]


def needs(store: EventStore, method: str, parameter: str | None = None) -> None:
    """Skip where this store does not offer `method` (or its `parameter`) yet."""
    found = getattr(store, method, None)
    if found is None or (
        parameter is not None and parameter not in inspect.signature(found).parameters
    ):
        what = f"{method}({parameter}=...)" if parameter else f"{method}()"
        pytest.skip(f"{type(store).__name__} has no {what}")


def test_every_backend_implements_the_protocol(store: EventStore) -> None:
    assert isinstance(store, EventStore)
    assert type(store).__name__ in repr(store)


def test_a_run_is_created_with_its_first_events_in_one_transaction(store: EventStore) -> None:
    record = store.create_run("r", "task", events=[ev("A"), ev("B", at=2.0)], status="running")
    assert (record.status, record.last_seq, record.updated_at) == ("running", 2, 2.0)
    assert kinds(store, "r") == ["A", "B"]
    with pytest.raises(ConcurrencyError, match="exists already"):
        store.create_run("r", "another", events=[ev("C")])
    assert kinds(store, "r") == ["A", "B"] and store.run("r").task == "task"
    assert [r.run_id for r in store.runs()] == ["r"]


def test_events_read_back_exactly_as_written_in_order(store: EventStore) -> None:
    store.create_run("r", "task", events=[ev("A", 0, at=1.25)])
    assert store.append("r", 1, [ev("B", 1, at=1 / 3), ev("C", 2)]) == 3
    events = store.read("r")
    assert [(e.seq, e.kind) for e in events] == [(1, "A"), (2, "B"), (3, "C")]
    assert events[1].payload == ev("B", 1).payload  # the very text, spacing and escapes kept
    assert events[1].meta == {"by": "x"} and events[1].recorded_at == 1 / 3
    assert [e.seq for e in store.read("r", after=1, upto=2)] == [2]
    assert store.read("r", after=3) == []
    assert store.run("r").last_seq == 3
    with pytest.raises(UnknownRun):
        store.read("nope")


def test_an_append_at_a_stale_seq_conflicts_and_writes_nothing(store: EventStore) -> None:
    store.create_run("r", "task", events=[ev("A")])
    store.append("r", 1, [ev("B")])
    with pytest.raises(ConcurrencyError, match="at seq 2, not 1.*Nothing was written"):
        store.append("r", 1, [ev("X"), ev("Y")], status="done")
    assert kinds(store, "r") == ["A", "B"] and store.run("r").status == "created"
    with pytest.raises(UnknownRun, match="Closest ids: r"):
        store.append("rr", 0, [ev("A")])


def test_two_stores_appending_at_one_seq_one_wins(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    first, second = backend.open(), backend.open()
    first.create_run("r", "task", events=[ev("A")])
    barrier = threading.Barrier(2)
    outcome: list[str] = []

    def write(store: EventStore, kind: str) -> None:
        barrier.wait()
        try:
            store.append("r", 1, [ev(kind)])
            outcome.append(kind)
        except ConcurrencyError:
            outcome.append("conflict")

    threads = [
        threading.Thread(target=write, args=(s, k)) for s, k in ((first, "B"), (second, "C"))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcome.count("conflict") == 1 and len(outcome) == 2
    assert kinds(second, "r") == ["A", next(k for k in outcome if k != "conflict")]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET payload = '{}' WHERE seq = 1",
        "DELETE FROM events WHERE seq = 2",
        "INSERT INTO events (run_id, seq, kind, payload, meta, recorded_at, version, hash) "
        "VALUES ('r', 4, 'GAP', '{}', '{}', 1.0, 1, 'h')",
        "INSERT INTO events (run_id, seq, kind, payload, meta, recorded_at, version, hash) "
        "VALUES ('r', 2, 'AGAIN', '{}', '{}', 1.0, 1, 'h')",
        "INSERT INTO events (run_id, seq, kind, payload, meta, recorded_at, version, hash) "
        "VALUES ('orphan', 1, 'A', '{}', '{}', 1.0, 1, 'h')",
        "DELETE FROM runs WHERE run_id = 'r'",
        "UPDATE runs SET run_id = 'renamed' WHERE run_id = 'r'",
    ],
    ids=["update", "delete", "gap", "same-seq", "orphan", "drop-run", "rename-run"],
)
def test_the_database_itself_keeps_the_log_append_only(backend: Backend, statement: str) -> None:
    store = backend.open()
    store.create_run("r", "task", events=[ev("A"), ev("B")])
    before = store.read("r")
    with pytest.raises(DB_ERRORS):
        backend.execute(statement)
    assert store.read("r") == before and store.run("r").run_id == "r"


def test_the_hash_chain_verifies_and_shows_a_changed_fact(backend: Backend) -> None:
    store = backend.open()
    store.create_run("r", "task", events=[ev("A")])
    store.append("r", 1, [ev("B", 1), ev("C", 2)])
    report = store.verify("r")
    assert report.ok and report.events == 3 and report.head == store.read("r")[-1].hash
    if backend.name == "postgresql":
        backend.execute("ALTER TABLE events DISABLE TRIGGER events_refuse_update")
        backend.execute("UPDATE events SET payload = '{\"n\": 5}' WHERE seq = 2")
    elif getattr(store, "log_format", 1) == 1:
        backend.execute("DROP TRIGGER events_refuse_update")
        backend.execute("UPDATE events SET payload = '{\"n\": 5}' WHERE seq = 2")
    else:  # log format 2: B's row keeps no hash, C's (the append's last) covers both
        backend.execute("DROP TRIGGER facts_refuse_update")
        backend.execute("UPDATE facts SET payload = '{\"n\": 5}' WHERE seq = 2")
    broken = store.verify("r")
    kept = 2 if backend.name == "postgresql" or getattr(store, "log_format", 1) == 1 else 3
    assert not broken.ok and broken.broken is not None and broken.broken.seq == kept


def test_every_backend_computes_the_same_hashes(backend: Backend, tmp_path: Any) -> None:
    from eventstore import SQLiteEventStore

    reference = SQLiteEventStore()
    store = backend.open()
    for s in (reference, store):
        s.create_run("r", "task", events=[ev("A", at=0.1)])
        s.append("r", 1, [ev("B", 1, at=1e-7), ev("C", 2, at=1e10)])
    assert [e.hash for e in store.read("r")] == [e.hash for e in reference.read("r")]


def test_a_batch_commits_all_or_nothing(store: EventStore) -> None:
    with pytest.raises(RuntimeError), store.batch():
        store.create_run("a", "task", events=[ev("A")])
        store.create_run("b", "task", events=[ev("A")])
        raise RuntimeError("stop")
    assert store.runs() == []
    with store.batch():
        store.create_run("a", "task", events=[ev("A")])
        store.append("a", 1, [ev("B")])
        store.create_run("b", "task", events=[ev("A")])
    assert [r.run_id for r in store.runs()] == ["a", "b"] and kinds(store, "a") == ["A", "B"]


def test_a_rolled_back_batch_leaves_the_chain_to_whoever_appends_next(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    first, second = backend.open(), backend.open()
    first.create_run("r", "task", events=[ev("A")])
    first.append("r", 1, [ev("B")])
    with pytest.raises(RuntimeError), first.batch():
        first.append("r", 2, [ev("GONE", 1)])
        raise RuntimeError("stop")
    second.append("r", 2, [ev("C", 2)])
    first.append("r", 3, [ev("D", 3)])
    first.append("r", 4, [], status="done")  # a status change alone
    first.append("r", 4, [ev("E", 4)])
    assert kinds(second, "r") == ["A", "B", "C", "D", "E"] and second.verify("r").ok


def test_status_and_the_catalog(store: EventStore) -> None:
    store.create_run("first", "task one", info={"k": [1, 2]}, created_at=10.0, events=[ev("A")])
    store.create_run("second", "task two", parent_id="first", branch_seq=1, created_at=20.0)
    store.set_status("first", "done")
    one, two = store.runs()
    assert (one.run_id, one.status, one.info, one.created_at) == (
        "first",
        "done",
        {"k": [1, 2]},
        10.0,
    )
    assert (two.parent_id, two.branch_seq, two.last_seq) == ("first", 1, 0)
    with pytest.raises(UnknownRun, match="Closest ids: first"):
        store.run("firs")
    with pytest.raises(UnknownRun):
        store.set_status("nope", "done")


def test_a_superseded_driver_writes_nothing(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    first, second = backend.open(), backend.open()
    first.create_run("r", "task", events=[ev("A")], status="running")
    first.claim("r")
    first.claim("r")  # its own run: claimed again
    with pytest.raises(RunInUse, match="is being driven by pid"):
        second.claim("r")
    second.claim("r", force=True)
    with pytest.raises(ConcurrencyError, match="taken over.*Nothing was written"):
        first.append("r", 1, [ev("LATE")])
    assert second.append("r", 1, [ev("B")]) == 2
    second.release("r")
    record = second.run("r")
    assert record.driver is None and record.lease_until is None
    first.claim("r")  # released: anyone may take it up
    assert first.append("r", 2, [ev("C")]) == 3 and kinds(second, "r") == ["A", "B", "C"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_append_that_hands_the_run_back_releases_it_with_the_status(
    backend: Backend, mode: str
) -> None:
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    driver, human = backend.open(), backend.open()
    if mode == "async" and not isinstance(driver, AsyncAppend):
        pytest.skip(f"{type(driver).__name__} has no append_async")
    driver.create_run("r", "task", events=[ev("A")], status="running")
    driver.claim("r")
    assert driver.append("r", 1, [ev("B")], status="running") == 2
    assert driver.run("r").driver is not None  # still driving
    if isinstance(driver, AsyncAppend) and mode == "async":
        asyncio.run(driver.append_async("r", 2, [ev("C")], status="waiting"))
    else:
        driver.append("r", 2, [ev("C")], status="waiting")
    record = human.run("r")  # never "waiting" and still named as driven
    assert (record.status, record.driver, record.lease_until) == ("waiting", None, None)
    human.claim("r")  # a human's decision is taken at once
    assert human.append("r", 3, [ev("D")], status="ready") == 4
    driver.release("r")  # the old driver's late release changes nothing
    assert human.run("r").status == "ready" and kinds(human, "r") == ["A", "B", "C", "D"]


def test_awaited_creation_claim_and_release_drive_the_run_like_the_sync_ones(
    backend: Backend,
) -> None:
    """A store that can await its catalog writes (`AsyncDrive`) creates and claims a run in one
    transaction, and claims and releases it like `claim` and `release`."""
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    driver, other = backend.open(), backend.open()
    if not isinstance(driver, AsyncDrive):
        pytest.skip(f"{type(driver).__name__} awaits no catalog writes")

    async def drive() -> None:
        await driver.create_run_async("r", "task", events=[ev("A")], status="running", claim=True)
        assert other.run("r").driver is not None and kinds(other, "r") == ["A"]
        with pytest.raises(RunInUse, match="is being driven by pid"):
            other.claim("r")
        assert driver.append("r", 1, [ev("B")]) == 2  # accepted: this store drives the run
        with pytest.raises(ConcurrencyError, match="exists already"):
            await driver.create_run_async("r", "again", events=[ev("X")], claim=True)
        await driver.release_async("r")
        assert other.run("r").driver is None
        await driver.release_async("r")  # not held: nothing to do
        await other.claim_async("r")
        with pytest.raises(RunInUse):
            await driver.claim_async("r")
        assert other.append("r", 2, [ev("C")]) == 3
        await driver.create_run_async("s", "unclaimed", events=[ev("A")])
        assert other.run("s").driver is None and other.run("s").status == "created"

    asyncio.run(drive())
    assert kinds(driver, "r") == ["A", "B", "C"] and driver.run("r").task == "task"


def hold_the_runs_row(backend: Backend, run_id: str, seconds: float) -> threading.Event:
    """Another connection holds what an append to the run must write (SQLite's write lock, the
    run's catalog row on PostgreSQL) for `seconds`; the event is set once it holds it."""
    held = threading.Event()

    def hold() -> None:
        if backend.name == "postgresql":
            import psycopg
            from psycopg import sql

            with psycopg.connect(backend.server) as conn:
                conn.execute(
                    sql.SQL("SET search_path TO {}").format(sql.Identifier(backend.schema))
                )
                conn.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (run_id,))
                held.set()
                time.sleep(seconds)
        else:
            conn = sqlite3.connect(backend.url, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            held.set()
            time.sleep(seconds)
            conn.execute("COMMIT")
            conn.close()

    threading.Thread(target=hold, daemon=True).start()
    assert held.wait(10)
    return held


def test_an_awaited_append_waits_for_a_lock_without_blocking_the_loop(backend: Backend) -> None:
    """While another connection holds what the append must write, the append waits off the
    event loop: a heartbeat on the loop goes on, and the append lands once the lock is let go."""
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    store = backend.open()
    if not isinstance(store, AsyncAppend):
        pytest.skip(f"{type(store).__name__} has no append_async")
    store.create_run("r", "task", events=[ev("A")], status="running")
    store.claim("r")
    hold_the_runs_row(backend, "r", 0.5)

    async def drive() -> tuple[int, int]:
        append = asyncio.create_task(store.append_async("r", 1, [ev("B")]))
        beats = 0
        while not append.done():
            await asyncio.sleep(0.01)
            beats += 1
        return await append, beats

    last, beats = asyncio.run(drive())
    assert last == 2 and kinds(store, "r") == ["A", "B"]
    assert beats >= 10  # the loop went on for the half second the lock was held


def test_a_cancelled_append_waits_for_its_end_without_blocking_the_loop(backend: Backend) -> None:
    """An append cancelled while another connection holds what it must write is carried out
    whole or not at all, and its task raises CancelledError once that is known; meanwhile the
    loop goes on (the wait for the outcome is awaited, not blocked on)."""
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    store = backend.open()
    if not isinstance(store, AsyncAppend):
        pytest.skip(f"{type(store).__name__} has no append_async")
    store.create_run("r", "task", events=[ev("A")], status="running")
    store.claim("r")
    hold_the_runs_row(backend, "r", 1.0)

    async def drive() -> tuple[bool, int]:
        append = asyncio.create_task(store.append_async("r", 1, [ev("B")]))
        await asyncio.sleep(0.05)  # the append waits for the lock
        append.cancel()
        beats = 0
        while not append.done():
            await asyncio.sleep(0.01)
            beats += 1
        try:
            await append
        except asyncio.CancelledError:
            return True, beats
        return False, beats

    cancelled, beats = asyncio.run(drive())
    assert cancelled
    assert beats >= 10  # the loop went on while the lock was held (about 1 s)
    there = kinds(store, "r")
    assert there in (["A"], ["A", "B"])  # whole or not at all
    assert store.append("r", len(there), [ev("C")]) == len(there) + 1  # and the run goes on


def test_a_lease_on_another_host_holds_the_run_until_it_runs_out(backend: Backend) -> None:
    store = backend.open()
    store.create_run("r", "task", events=[ev("A")], status="running")
    far = time.time() + 3600
    backend.execute(
        "UPDATE runs SET driver_host = 'elsewhere', driver_pid = 1, driver_token = 't', "
        "lease_until = ? WHERE run_id = 'r'",
        (far,),
    )
    with pytest.raises(RunInUse, match="pid 1 on host elsewhere"):
        store.claim("r")
    assert store.run("r").lease_until == far and store.run("r").driver_gone() is False
    backend.execute("UPDATE runs SET lease_until = ? WHERE run_id = 'r'", (time.time() - 1,))
    assert store.run("r").driver_gone()
    store.claim("r")
    assert store.run("r").driver is not None and store.run("r").driver.host != "elsewhere"  # type: ignore[union-attr]


def test_the_lease_is_renewed_while_the_store_holds_the_run(backend: Backend) -> None:
    if backend.name == "sqlite-memory":
        pytest.skip("SQLite in memory has no other reader: it renews nothing")
    store = backend.open(lease=0.6)
    store.create_run("r", "task", events=[ev("A")], status="running")
    store.claim("r")
    first = store.run("r").lease_until
    deadline = time.monotonic() + 30
    while store.run("r").lease_until == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (store.run("r").lease_until or 0) > (first or 0)


def test_open_refuses_writes_when_read_only(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("SQLite in memory cannot be reopened")
    backend.open().create_run("r", "task", events=[ev("A")])
    reader = backend.open(read_only=True, create=False)
    assert kinds(reader, "r") == ["A"]
    with pytest.raises(StoreError):
        reader.append("r", 1, [ev("B")])
    assert kinds(reader, "r") == ["A"]


# -- the catalog summary, its filters and run-id lookup -------------------------------------


def test_the_summary_is_written_with_the_facts(store: EventStore) -> None:
    needs(store, "append", "summary")
    first = RunSummary(steps=1, input_tokens=10, output_tokens=2, model="m1")
    store.create_run("r", "task", events=[ev("A")], summary=first)  # type: ignore[call-arg]
    assert store.run("r").summary == first
    store.append("r", 1, [ev("B")])  # no summary: left as it was
    assert store.run("r").summary == first
    last = RunSummary(2, 30, 7, 0.0125, "m1", "The answer.", None)
    store.append("r", 2, [ev("C")], status="done", summary=last)  # type: ignore[call-arg]
    assert store.run("r").summary == last
    with pytest.raises(ConcurrencyError):
        store.append("r", 1, [ev("X")], summary=RunSummary(steps=99))  # type: ignore[call-arg]
    assert store.run("r").summary == last


def test_a_summary_is_back_filled_for_runs_logged_without_one(store: EventStore) -> None:
    needs(store, "set_summary")
    extra: Any = store
    store.create_run("old", "task", events=[ev("A")])
    store.create_run("empty", "task")
    store.create_run("new", "task", events=[ev("A")], summary=RunSummary(steps=1))  # type: ignore[call-arg]
    assert extra.unsummarized() == ["old"]
    long = RunSummary(3, 5, 6, None, "m", "x" * 500, None)
    extra.set_summary("old", long)
    assert store.run("old").summary == RunSummary(3, 5, 6, None, "m", "x" * 200, None)
    assert extra.unsummarized() == []
    with pytest.raises(UnknownRun):
        extra.set_summary("nope", long)


def test_events_of_kinds_across_runs_and_full_text_search(store: EventStore) -> None:
    needs(store, "search")
    extra: Any = store
    say = lambda kind, text, at: NewEvent(kind, json.dumps({"text": text}), "{}", at)  # noqa: E731
    store.create_run("a", "t", events=[say("Asked", "the capital of France", 1.0)])
    store.create_run(
        "b", "t", events=[say("Asked", "rivers", 2.0), say("Said", "Paris, France", 3.0)]
    )
    assert [(e.run_id, e.seq) for e in extra.events_of(["Said"])] == [("b", 2)]
    assert len(extra.events_of(["Asked", "Said"], since=2.0)) == 2
    hits = extra.search("france")
    assert sorted((h[0], h[1], h[2]) for h in hits) == [("a", 1, "Asked"), ("b", 2, "Said")]
    assert all("[France]" in h[3] for h in hits)
    assert [h[0] for h in extra.search("Paris france")] == ["b"]  # every word
    assert [h[0] for h in extra.search("france", kinds=["Asked"])] == ["a"]
    assert extra.search("london") == [] and extra.search("  ") == []


def test_runs_filters(store: EventStore) -> None:
    needs(store, "runs", "status")
    runs: Any = store.runs
    for i, (status, model, task) in enumerate(
        [("done", "m1", "Find Paris"), ("failed", "m2", "pay 100%"), ("done", "m2", "paris_trip")]
    ):
        store.create_run(
            f"r{i}",
            task,
            created_at=10.0 + i,
            events=[ev("A", at=100.0 + i)],
            status=status,
            summary=RunSummary(model=model),  # type: ignore[call-arg]
        )
    ids = lambda found: [r.run_id for r in found]  # noqa: E731
    assert ids(runs()) == ["r0", "r1", "r2"]
    assert ids(runs(status="done")) == ["r0", "r2"]
    assert ids(runs(model="m2")) == ["r1", "r2"]
    assert ids(runs(task="PARIS")) == ["r0", "r2"]
    assert ids(runs(task="100%")) == ["r1"] and ids(runs(task="s_t")) == ["r2"]
    assert ids(runs(task="0%")) == ["r1"] and ids(runs(task="_")) == ["r2"]
    assert ids(runs(since=101.0)) == ["r1", "r2"]
    assert ids(runs(newest_first=True, limit=2)) == ["r2", "r1"]
    assert ids(runs(status="done", model="m2", task="paris", since=50.0)) == ["r2"]


def test_runs_of_given_parents_through_the_parent_index(store: EventStore) -> None:
    store.create_run("root", "t", created_at=1.0, events=[ev("A")])
    store.create_run("other", "t", created_at=2.0, events=[ev("A")])
    for i, parent in enumerate(["root", "other", "root", "root-1-0"]):
        store.create_run(
            f"root-1-{i}" if parent != "root-1-0" else "grandchild",
            "another task",
            parent_id=parent,
            branch_seq=i + 1,
            info={"subagent": {"parent": parent, "tool": "t"}},
            created_at=10.0 + i,
            events=[ev("A")],
        )
    ids = lambda found: [r.run_id for r in found]  # noqa: E731
    assert ids(store.runs(parents=["root"])) == ["root-1-0", "root-1-2"]
    assert ids(store.runs(parents=["root", "root-1-0"], newest_first=True)) == [
        "grandchild",
        "root-1-2",
        "root-1-0",
    ]
    assert ids(store.runs(parents=["other"], status="created")) == ["root-1-1"]
    assert store.runs(parents=[]) == [] and store.runs(parents=["nobody"]) == []
    assert store.run("root-1-1").info == {"subagent": {"parent": "other", "tool": "t"}}


def test_resolve_finds_a_run_by_its_id_or_a_unique_prefix(store: EventStore) -> None:
    needs(store, "resolve")
    resolve: Any = store.resolve  # type: ignore[attr-defined]
    for run_id in ("abc123", "abd456", "abc", "x_%y"):
        store.create_run(run_id, "task")
    assert resolve("abc") == "abc"  # the exact id, though others start with it
    assert resolve("abc1") == "abc123" and resolve("abd") == "abd456"
    assert resolve("x_") == "x_%y"  # no wildcards in a prefix
    with pytest.raises(AmbiguousRunId, match="matches 3 runs"):
        resolve("ab")
    with pytest.raises(UnknownRun, match="abc123") as refused:
        resolve("abc124")
    assert not isinstance(refused.value, AmbiguousRunId)
    with pytest.raises(UnknownRun):
        resolve("")


# -- workers: claim the next run that can go on, wait for appends --------------------------


def test_claim_next_takes_orphaned_then_ready_then_queued_runs(backend: Backend) -> None:
    store = backend.open()
    needs(store, "claim_next")
    claim_next: Any = store.claim_next  # type: ignore[attr-defined]
    store.create_run("done", "t", events=[ev("A", at=1.0)], status="done")
    store.create_run("ready", "t", events=[ev("A", at=3.0)], status="ready")
    store.create_run("queued", "t", events=[ev("A", at=2.0)], status="queued")
    store.create_run("orphan", "t", events=[ev("A", at=4.0)], status="running")
    store.create_run("live", "t", events=[ev("A", at=0.5)], status="running")
    backend.execute(
        "UPDATE runs SET driver_host = 'elsewhere', driver_pid = 1, driver_token = 't', "
        "lease_until = ? WHERE run_id = ?",
        (time.time() - 5, "orphan"),
    )
    backend.execute(
        "UPDATE runs SET driver_host = 'elsewhere', driver_pid = 1, driver_token = 't', "
        "lease_until = ? WHERE run_id = ?",
        (time.time() + 3600, "live"),
    )
    assert claim_next(kinds=("queued",)).run_id == "queued"
    store.release("queued")
    # the orphan waited least, but its work was under way: it goes first, then the answered run
    taken = [claim_next().run_id, claim_next().run_id, claim_next().run_id]
    assert taken == ["orphan", "ready", "queued"] and claim_next() is None
    assert claim_next(kinds=()) is None
    with pytest.raises(StoreError, match="got 'waiting'; the kinds are 'queued', 'ready'"):
        claim_next(kinds=("waiting",))
    record = store.run("queued")
    assert record.driver is not None and record.driver.host != "elsewhere"
    store.append("queued", 1, [ev("B")])  # claimed: its appends are this store's


def test_claim_next_never_gives_one_run_to_two_stores(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    stores = [backend.open(), backend.open()]
    needs(stores[0], "claim_next")
    for i in range(12):
        stores[0].create_run(f"q{i:02}", "t", events=[ev("A", at=float(i))], status="queued")
    claimed: list[tuple[int, str]] = []
    barrier = threading.Barrier(4)

    def work(worker: int) -> None:
        store: Any = stores[worker % 2]
        barrier.wait()
        while (record := store.claim_next()) is not None:
            claimed.append((worker, record.run_id))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(run_id for _, run_id in claimed) == [f"q{i:02}" for i in range(12)]


def test_wait_for_append_wakes_on_another_stores_append(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("SQLite in memory is one store")
    follower, writer = backend.open(), backend.open()
    needs(follower, "wait_for_append")
    wait: Any = follower.wait_for_append  # type: ignore[attr-defined]
    writer.create_run("r", "task", events=[ev("A")])
    wait(0.0)  # starts following: what came before is read, not waited for
    seen = [e.seq for e in follower.read("r")]
    done = threading.Event()

    def append_later() -> None:
        writer.append("r", 1, [ev("B")])
        done.set()

    threading.Thread(target=append_later).start()
    assert wait(60.0) is True
    done.wait(60)
    seen += [e.seq for e in follower.read("r", after=seen[-1])]
    assert seen == [1, 2]
    while wait(0.0):  # drain whatever else woke it
        pass
    assert wait(0.05) is False
