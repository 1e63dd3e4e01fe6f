"""The store's writer: a commit never makes the caller's event loop wait for a lock (it is made
at once when nothing else writes, else by the writer thread), writes that arrive together while
another is being committed share one transaction, and one write's failure is its own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import sqlite3
import threading
from pathlib import Path

import pytest

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller
from eventstore import (
    AsyncAppend,
    ConcurrencyError,
    NewEvent,
    SQLiteEventStore,
    UnknownRun,
    wakeups,
)
from eventstore.wakeups import BATCH, committed

from .scenarios import LONG


def ev(kind: str) -> NewEvent:
    return NewEvent(kind, "{}", "{}", 1.0)


def test_the_sqlite_store_appends_without_blocking_a_loop() -> None:
    assert isinstance(SQLiteEventStore(), AsyncAppend)


def test_appends_that_arrive_together_share_one_transaction_each_checked_alone(
    tmp_path: Path,
) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    for run in "abcd":
        store.create_run(run, "task", events=[ev("A")])
    before = store.transactions

    held, let_go = threading.Event(), threading.Event()

    def hold() -> None:  # another thread is committing: no append below can commit at once
        with store._lock:
            held.set()
            let_go.wait()

    async def main() -> list[int | BaseException]:
        pending = [
            asyncio.ensure_future(store.append_async("a", 1, [ev("B"), ev("C")])),
            asyncio.ensure_future(store.append_async("b", 1, [ev("B")], status="done")),
            asyncio.ensure_future(store.append_async("c", 0, [ev("X")])),  # stale
            asyncio.ensure_future(store.append_async("nope", 0, [ev("X")])),  # unknown
            asyncio.ensure_future(store.append_async("d", 1, [ev("B")])),
        ]
        await asyncio.sleep(0)  # each append task runs up to its submission to the writer
        let_go.set()  # the writer waited for the lock, so every append joins one group
        return await asyncio.gather(*pending, return_exceptions=True)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    results = asyncio.run(main())
    holder.join()
    assert results[:2] == [3, 2] and results[4] == 2
    assert isinstance(results[2], ConcurrencyError) and isinstance(results[3], UnknownRun)
    assert store.transactions - before <= 2  # the first may have been taken alone
    assert [e.kind for e in store.read("a")] == ["A", "B", "C"]
    assert [e.kind for e in store.read("c")] == ["A"]  # the stale one wrote nothing
    assert [e.kind for e in store.read("d")] == ["A", "B"]
    assert store.run("b").status == "done"
    assert all(store.verify(run).ok for run in "abcd")


def test_the_loop_goes_on_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    store = SQLiteEventStore(db)
    store.create_run("r", "task", events=[ev("A")])
    other = sqlite3.connect(db, isolation_level=None)

    async def main() -> tuple[int, int]:
        other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        append = asyncio.ensure_future(store.append_async("r", 1, [ev("B")], durable=True))
        ticks = 0
        while ticks < 50:  # the loop runs other work meanwhile: it is not blocked
            await asyncio.sleep(0.001)
            ticks += 1
        assert not append.done()  # the commit waits for the lock, off the loop
        other.execute("COMMIT")
        return ticks, await append

    assert asyncio.run(main()) == (50, 2)
    assert [e.kind for e in store.read("r")] == ["A", "B"]


def test_concurrent_runs_on_one_loop_share_transactions(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")

    def agent(i: int) -> AgentBuilder:
        script = [LlmResponse.final_answer(f"{LONG} ({i})")]
        config = AgentConfig(reflect_every_n_steps=0)
        return AgentBuilder(f"task {i}").llm(MockLlmCaller(script)).config(config).store(store)

    engines = [agent(i).run_id(f"run{i}").build() for i in range(20)]

    async def main() -> list[str]:
        return await asyncio.gather(*(e.arun() for e in engines))

    assert asyncio.run(main()) == [f"{LONG} ({i})" for i in range(20)]
    assert [r.status for r in store.runs()] == ["done"] * 20
    assert all(store.verify(f"run{i}").ok for i in range(20))


def test_sync_appends_from_sync_code_and_inside_a_batch_still_work(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    store.create_run("r", "task")
    assert store.append("r", 0, [ev("A")]) == 1
    with store.batch():
        store.append("r", 1, [ev("B")])
        store.create_run("s", "task", events=[ev("A")])

    async def in_batch() -> int:
        with store.batch():  # an awaited append inside this thread's batch joins the batch
            return await store.append_async("r", 2, [ev("C")])

    assert asyncio.run(in_batch()) == 3
    with pytest.raises(ConcurrencyError):
        store.append("r", 1, [ev("X")])
    assert [e.kind for e in store.read("r")] == ["A", "B", "C"]
    store.close()
    with pytest.raises(Exception, match="closed"):
        store.append("r", 3, [ev("D")])


def test_waiters_of_a_group_commit_are_woken_a_few_per_turn_of_the_loop() -> None:
    """One commit may finish hundreds of writes at once: their waiters wake a batch per turn of
    the loop, so a timer due meanwhile waits for one batch, not for all of them."""
    count = 5 * BATCH + 3

    async def main() -> tuple[list[int], list[int]]:
        writes = [concurrent.futures.Future[int]() for _ in range(count)]
        woke: list[int] = []

        async def wait(i: int) -> None:
            woke.append(await committed(writes[i]))

        tasks = [asyncio.create_task(wait(i)) for i in range(count)]
        await asyncio.sleep(0)  # every task waits
        done = threading.Thread(target=lambda: [w.set_result(i) for i, w in enumerate(writes)])
        done.start()
        done.join()  # all finished at once, as by one group commit
        seen: list[int] = []
        while len(woke) < count:
            await asyncio.sleep(0)  # one turn of the loop
            seen.append(len(woke))
        await asyncio.gather(*tasks)
        return woke, seen

    woke, seen = asyncio.run(main())
    assert sorted(woke) == list(range(count))  # each got its own write's result
    grew = [b - a for a, b in zip([0, *seen], seen, strict=False)]
    assert max(grew) == BATCH and len([g for g in grew if g]) == 6


def test_a_waiter_gets_its_writes_error_and_a_cancelled_one_learns_the_outcome_first() -> None:
    async def main() -> None:
        failed = concurrent.futures.Future[int]()
        failed.set_running_or_notify_cancel()
        threading.Timer(0.01, lambda: failed.set_exception(UnknownRun("r", []))).start()
        with pytest.raises(UnknownRun):
            await committed(failed)
        slow = concurrent.futures.Future[int]()
        slow.set_running_or_notify_cancel()
        task = asyncio.create_task(committed(slow))
        await asyncio.sleep(0.01)
        threading.Timer(0.05, lambda: slow.set_result(7)).start()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert slow.done() and slow.result() == 7  # known before the cancellation was raised

    asyncio.run(main())


def test_a_finished_loop_leaves_no_waker_behind() -> None:
    async def wait_once() -> int:
        write = concurrent.futures.Future[int]()
        write.set_running_or_notify_cancel()
        threading.Timer(0.01, lambda: write.set_result(1)).start()
        return await committed(write)

    gc.collect()
    before = len(wakeups._wakers)
    for _ in range(3):
        assert asyncio.run(wait_once()) == 1
    gc.collect()
    assert len(wakeups._wakers) == before


def test_a_commit_made_at_once_leaves_the_stores_wait_for_a_lock_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    store = SQLiteEventStore(db, busy_timeout=5)
    store.create_run("r", "task", events=[ev("A")])
    assert asyncio.run(store.append_async("r", 1, [ev("B")])) == 2  # nothing else writes
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    threading.Timer(0.2, lambda: other.execute("COMMIT")).start()
    assert store.append("r", 2, [ev("C")]) == 3  # waited for the other process, did not fail
    other.close()
    assert [e.kind for e in store.read("r")] == ["A", "B", "C"]


def test_a_busy_loop_leaves_its_commits_to_the_writer_and_an_idle_one_commits_at_once(
    tmp_path: Path,
) -> None:
    def appended(busy: bool) -> bool:
        """Whether the writer thread was started to commit an awaited append."""
        store = SQLiteEventStore(tmp_path / f"{busy}.db")
        store.create_run("r", "task", events=[ev("A")])

        async def main() -> int:
            if busy:  # many runs going on: more callbacks ready than a batch of wake-ups
                loop = asyncio.get_running_loop()
                for _ in range(BATCH * 2):
                    loop.call_soon(lambda: None)
            return await store.append_async("r", 1, [ev("B")])

        assert asyncio.run(main()) == 2
        started = store._writer._thread is not None
        store.close()
        return started

    assert appended(busy=True) and not appended(busy=False)
