"""The store's inbox on every backend: messages to a run from anyone, numbered in order, taken
by the run's driver only (fenced like its appends), in the transaction of the append that
records them; a message is never changed nor deleted, only taken."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from eventstore import (
    ConcurrencyError,
    EventStore,
    Inbox,
    InboxMessage,
    LeaseLost,
    NewEvent,
    SQLiteEventStore,
    StoreError,
    UnknownRun,
)

from .backends import Backend


def ev(kind: str) -> NewEvent:
    return NewEvent(kind, "{}", "{}", time.time())


def inbox(store: EventStore) -> Inbox:
    assert isinstance(store, Inbox)
    return store


def said(messages: list[InboxMessage]) -> list[tuple[int, str, str]]:
    return [(m.n, m.kind, m.payload) for m in messages]


def test_messages_are_numbered_per_run_and_pending_until_taken(backend: Backend) -> None:
    store = inbox(backend.open())
    store.create_run("r", "task", events=[ev("A")], status="running", claim=True)  # type: ignore[attr-defined]
    store.create_run("other", "task", events=[ev("A")], status="queued")  # type: ignore[attr-defined]
    assert store.pending("r") == []
    assert store.post("r", "steer", "in Celsius") == 1
    assert store.post("r", "stop", "") == 2
    assert store.post("other", "steer", "hello") == 1
    first = store.pending("r")
    assert said(first) == [(1, "steer", "in Celsius"), (2, "stop", "")]
    assert first[0].run_id == "r" and first[0].posted_at <= time.time()
    store.take("r", 1)
    assert said(store.pending("r")) == [(2, "stop", "")]
    store.take("r", 2)
    store.take("r", 2)  # again: nothing left to take, nothing refused
    assert store.pending("r") == []
    assert said(store.pending("other")) == [(1, "steer", "hello")]
    assert store.post("r", "steer", "more") == 3  # numbers go on after the taken ones


def test_anyone_posts_but_only_the_driver_takes(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("two stores see one log only on a file or a server")
    driver, outsider = inbox(backend.open()), inbox(backend.open())
    driver.create_run("r", "task", events=[ev("A")], status="running", claim=True)  # type: ignore[attr-defined]
    assert outsider.post("r", "steer", "from another process") == 1
    assert said(driver.pending("r")) == [(1, "steer", "from another process")]
    with pytest.raises(ConcurrencyError, match="only its driver takes its messages"):
        outsider.take("r", 1)
    assert len(outsider.pending("r")) == 1
    with pytest.raises(UnknownRun):
        outsider.post("nope", "steer", "x")
    # a driver whose run was taken over takes nothing more: fenced like its appends
    outsider.claim("r", force=True)  # type: ignore[attr-defined]
    with pytest.raises(LeaseLost):
        driver.take("r", 1)
    assert len(driver.pending("r")) == 1
    outsider.take("r", 1)
    assert driver.pending("r") == []


def test_a_take_commits_with_the_append_that_records_it_or_not_at_all(backend: Backend) -> None:
    store = backend.open()
    box = inbox(store)
    store.create_run("r", "task", events=[ev("A")], status="running", claim=True)
    box.post("r", "steer", "x")
    with pytest.raises(RuntimeError), store.batch():
        store.append("r", 1, [ev("Steered")])
        box.take("r", 1)
        raise RuntimeError("the process stops before the commit")
    assert [e.kind for e in store.read("r")] == ["A"] and len(box.pending("r")) == 1
    with store.batch():
        store.append("r", 1, [ev("Steered")])
        box.take("r", 1)
    assert [e.kind for e in store.read("r")] == ["A", "Steered"] and box.pending("r") == []


def test_a_message_is_never_changed_nor_deleted(backend: Backend) -> None:
    store = inbox(backend.open())
    store.create_run("r", "task", events=[ev("A")], status="running", claim=True)  # type: ignore[attr-defined]
    store.post("r", "steer", "x")
    store.take("r", 1)
    for statement in (
        "UPDATE inbox SET payload = 'y'",
        "UPDATE inbox SET taken = 0"
        if backend.name != "postgresql"
        else "UPDATE inbox SET taken = false",
        "DELETE FROM inbox",
    ):
        with pytest.raises(Exception, match="inbox: a message is never"):
            backend.execute(statement)


def test_posts_from_many_threads_get_distinct_numbers(backend: Backend) -> None:
    if not backend.shared:
        pytest.skip("one store per thread needs a file or a server")
    first = inbox(backend.open())
    first.create_run("r", "task", events=[ev("A")], status="running")  # type: ignore[attr-defined]
    numbers: list[int] = []
    errors: list[BaseException] = []

    def post(k: int) -> None:
        store = inbox(backend.open())
        try:
            for i in range(5):
                numbers.append(store.post("r", "steer", f"{k}-{i}"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=post, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(numbers) == list(range(1, 21))
    assert [m.n for m in first.pending("r")] == list(range(1, 21))


def test_the_postgresql_driver_hears_a_post_from_another_host_without_asking_each_step(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    backend = Backend("postgresql", tmp_path, request)
    try:
        driver, outsider = inbox(backend.open()), inbox(backend.open())
        driver.create_run("r", "task", events=[ev("A")], status="running", claim=True)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10
        while not driver._inbox._bell.quiet("r"):  # type: ignore[attr-defined]
            assert driver.pending("r") == []
            assert time.monotonic() < deadline, "the inbox listener never started"
            time.sleep(0.02)
        outsider.post("r", "steer", "hello")
        while not driver.pending("r"):  # the NOTIFY makes it ask the server again
            assert time.monotonic() < deadline, "the post was never heard"
            time.sleep(0.01)
        assert said(driver.pending("r")) == [(1, "steer", "hello")]
    finally:
        backend.close()


def test_the_sqlite_inbox_table_and_an_old_log_without_it(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    SQLiteEventStore(path).close()
    conn = sqlite3.connect(path)
    columns = [(r[1], r[2], r[3], r[5]) for r in conn.execute("PRAGMA table_info(inbox)")]
    assert columns == [
        ("run_id", "TEXT", 1, 1),
        ("n", "INTEGER", 1, 2),
        ("kind", "TEXT", 1, 0),
        ("payload", "TEXT", 1, 0),
        ("posted_at", "REAL", 1, 0),
        ("taken", "INTEGER", 1, 0),
    ]
    conn.executescript(  # as a log from before the inbox, opened read-only
        "DROP TRIGGER inbox_refuse_delete; DROP TABLE inbox; PRAGMA user_version = 7;"
    )
    conn.close()
    old = SQLiteEventStore(path, read_only=True)
    try:
        assert old.pending("r") == []
        with pytest.raises(StoreError):
            old.post("r", "steer", "x")
    finally:
        old.close()
