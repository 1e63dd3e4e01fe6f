"""Fencing and blips: a driver that lost its run writes nothing more to it, on every backend; a
store error stops a run where it is (resumable, never aborted); PostgreSQL connections that the
server closes are replaced and the work goes on; workers outlive store errors."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentsm import AgentBuilder, AgentConfig, HumanInputRequired, LlmResponse, tool
from eventstore import (
    Driver,
    EventStore,
    LeaseLost,
    NewEvent,
    StoreError,
    open_store,
)
from replay import replay_run, resume_run
from replay.resuming import continue_claimed
from replay.worker import Worker

from .backends import Backend, require_postgres, with_schema


def ev(kind: str) -> NewEvent:
    return NewEvent(kind, "{}", "{}", time.time())


def kinds(store: EventStore, run_id: str) -> list[str]:
    return [e.kind for e in store.read(run_id)]


@pytest.fixture(params=["sqlite-file", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    b = Backend(request.param, tmp_path, request)
    yield b
    b.close()


# -- fencing ------------------------------------------------------------------------------------


def test_a_driver_that_lost_its_run_writes_nothing_more_to_it(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    first.create_run("r", "task", events=[ev("A")], status="running", claim=True)
    second.claim("r", force=True)  # the first stalled past its lease: taken over
    assert second.append("r", 1, [ev("B")]) == 2
    second.append("r", 2, [], status="stopped")  # set aside: released, nobody drives it now
    assert second.run("r").driver is None
    with pytest.raises(LeaseLost, match="taken over.*writes nothing more"):
        first.append("r", 1, [ev("LATE")])
    # the refusal is sticky: no later write of the first's gets through, whatever it carries
    with pytest.raises(LeaseLost):
        first.append("r", 2, [ev("ABORTED")], status="aborted")
    with pytest.raises(LeaseLost):
        first.set_status("r", "aborted")
    first.release("r")  # nothing to release: it holds nothing
    record = second.run("r")
    assert kinds(second, "r") == ["A", "B"] and record.status == "stopped"
    assert second.verify("r").ok
    first.claim("r")  # a new claim is a new driver: it may write again
    assert first.append("r", 2, [ev("C")]) == 3


def test_a_lost_lease_is_found_by_the_renewal_before_any_write(backend: Backend) -> None:
    first, second = backend.open(lease=0.3), backend.open()
    first.create_run("r", "task", events=[ev("A")], status="running", claim=True)
    second.claim("r", force=True)
    deadline = time.monotonic() + 30
    while not lost(first, "r"):  # renewed every 0.1 s: the renewal finds the takeover
        assert time.monotonic() < deadline, "the renewal never noticed the takeover"
        time.sleep(0.02)
    with pytest.raises(LeaseLost):
        first.append("r", 1, [ev("LATE")])
    assert kinds(second, "r") == ["A"]


def lost(store: EventStore, run_id: str) -> bool:
    tokens = getattr(store, "_tokens", None) or store._leases.tokens  # type: ignore[attr-defined]
    return bool(tokens.is_lost(run_id))


def test_status_changes_of_the_driver_carry_its_token(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    first.create_run("r", "task", events=[ev("A")], status="running", claim=True)
    second.claim("r", force=True)
    with pytest.raises(LeaseLost):
        first.set_status("r", "stopped")  # a worker setting aside a run it no longer has
    assert second.run("r").status == "running"
    backend.open().set_status("r", "stopped")  # a store that never drove it: an admin's change
    assert second.run("r").status == "stopped"


# -- the engine: a lost run, a failed store ------------------------------------------------------


@tool
def pay(to: str) -> str:
    """Pay someone (not idempotent)."""
    PAID.append(to)
    return f"paid {to}"


PAID: list[str] = []


class PayEveryone:
    """Pays p0, p1, p2 one call at a time, then answers; decided from memory alone, so a resumed
    or replayed run asks it the same. `during(n)` runs before the n-th answer is returned."""

    def __init__(self, during: Any = None) -> None:
        self.during = during
        self.calls = 0

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        self.calls += 1
        if self.during is not None:
            self.during(self.calls)
        done = len(memory.history)
        if done < 3:
            return LlmResponse.tool_call("pay", {"to": f"p{done}"}, id=f"c{done}")
        return LlmResponse.final_answer("All three people were paid.")


def payer(during: Any = None) -> Any:
    def make(task: str) -> AgentBuilder:
        return AgentBuilder(task).llm(PayEveryone(during)).tool(pay)

    return make


def facts_of(store: EventStore, run_id: str) -> list[str]:
    return [e.kind for e in store.read(run_id)]


def test_an_effect_starts_only_after_its_start_proved_the_lease(backend: Backend) -> None:
    """The commit before a tool runs carries the lease token: a driver that lost the run while
    the LLM answered is refused there, and the tool never runs; no closing fact follows."""
    PAID.clear()
    store, other = backend.open(), backend.open()

    def take_over(n: int) -> None:
        if n == 2:  # while the LLM plans the second payment, another driver takes the run
            other.claim("run1", force=True)
            other.append("run1", other.run("run1").last_seq, [], status="stopped")

    engine = payer(take_over)("Pay everyone").store(store).run_id("run1").build()
    with pytest.raises(LeaseLost):
        engine.run()
    assert PAID == ["p0"]  # the second payment never started
    record = other.run("run1")
    assert record.status == "stopped" and "RunAborted" not in facts_of(other, "run1")
    assert other.verify("run1").ok
    with pytest.raises(LeaseLost):  # the engine writes nothing more, asked again
        engine.run()
    assert facts_of(other, "run1")[-1] != "RunAborted" and other.run("run1").status == "stopped"


class FailingAppends:
    """A real store whose appends fail with a StoreError once `fail` is set (a disk that filled,
    a server gone for longer than the retries): a fault injected around the real thing."""

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self.fail = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def append(self, *args: Any, **kw: Any) -> int:
        if self.fail:
            raise StoreError("Could not append: the disk is full (injected).")
        return self._store.append(*args, **kw)  # type: ignore[no-any-return]

    async def append_async(self, *args: Any, **kw: Any) -> int:
        if self.fail:
            raise StoreError("Could not append: the disk is full (injected).")
        return await self._store.append_async(*args, **kw)  # type: ignore[attr-defined,no-any-return]


def test_a_store_error_stops_the_run_where_it_is_resumable_and_replaying_identical(
    backend: Backend,
) -> None:
    PAID.clear()
    real = backend.open()
    failing = FailingAppends(real)

    def fail(n: int) -> None:
        failing.fail = n == 3  # the third plan's commit meets the failure

    engine = payer(fail)("Pay everyone").store(failing).run_id("run1").build()  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="disk is full"):
        engine.run()
    assert PAID == ["p0", "p1"]
    assert "RunAborted" not in facts_of(real, "run1")  # a fault of the store, not of the run
    record = real.run("run1")
    assert record.status == "running" and record.shown_status == "interrupted"
    taken = backend.open().claim_next()  # nothing stranded: a worker may take it at once
    assert taken is not None and taken.run_id == "run1"
    backend.open().release("run1")  # (given back; resumed by hand below)
    assert resume_run(backend.url, "run1", payer(), force=True) == "All three people were paid."
    assert PAID == ["p0", "p1", "p2"]
    assert replay_run(backend.url, "run1", payer()).identical


# -- PostgreSQL: connections the server closes ---------------------------------------------------


def terminate_backends(server: str, schema: str) -> int:
    """End every connection to the test database but this one (as `pg_terminate_backend` by an
    administrator, a failover or a proxy restart does); the number ended."""
    del schema
    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name LIKE 'agentsm-fencing-test%'"
        ).fetchall()
    return len(rows)


def test_runs_go_on_through_connections_the_server_closes(request: pytest.FixtureRequest) -> None:
    server = require_postgres(request)
    url = with_schema(server, f"t_{time.time_ns()}")
    url += "&application_name=agentsm-fencing-test"
    PAID.clear()
    ended: list[int] = []
    store = open_store(url)
    try:

        def blip(n: int) -> None:
            ended.append(terminate_backends(server, ""))

        answers = [
            payer(blip)(f"Pay everyone {i}").store(store).run_id(f"run{i}").build().run()
            for i in range(3)
        ]
        assert answers == ["All three people were paid."] * 3
        assert sum(ended) >= 3  # connections were ended under the runs
        for i in range(3):
            assert store.run(f"run{i}").status == "done" and store.verify(f"run{i}").ok
            assert "RunAborted" not in facts_of(store, f"run{i}")
            assert replay_run(store, f"run{i}", payer()).identical
        assert len(PAID) == 9  # each payment once
    finally:
        store.close()
        from .backends import drop_schema

        drop_schema(server, url.split("schema=")[1].split("&")[0])


def test_an_operational_error_is_named_for_what_happened() -> None:
    from psycopg import errors as pgerrors

    from eventstore.pg_connections import Connections

    db = Connections(
        "",
        "postgresql://db.example:5432/agents",
        "agentsm",
        read_only=False,
        pool_size=2,
        connect_timeout=1,
    )
    closed = db.what_happened(
        pgerrors.AdminShutdown("terminating connection due to administrator command")
    )
    assert (
        "connection to PostgreSQL at postgresql://db.example:5432/agents was closed by the server"
        in closed
    )
    assert "is the server running" not in closed


# -- workers outlive store errors -------------------------------------------------------------


class FailingClaims:
    """A real store whose `claim_next` fails `n` times (the database restarting)."""

    def __init__(self, store: EventStore, n: int) -> None:
        self._store, self.left = store, n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def claim_next(self, **kw: Any) -> Any:
        if self.left > 0:
            self.left -= 1
            raise StoreError("Could not claim the next run: the connection was lost (injected).")
        return self._store.claim_next(**kw)


def test_a_worker_backs_off_and_goes_on_after_store_errors(backend: Backend) -> None:
    PAID.clear()
    store = backend.open()
    run_id = payer()("Pay everyone").store(store).submit()
    flaky = FailingClaims(store, 3)
    said: list[str] = []
    stop = threading.Event()
    results: list[Any] = []

    def done(result: Any) -> None:
        results.append(result)
        stop.set()

    worker = Worker(flaky, payer(), poll=0.05, on_result=done, on_error=said.append)  # type: ignore[arg-type]
    runner = threading.Thread(target=worker.run_forever, args=(stop,))
    runner.start()
    runner.join(timeout=120)
    assert not runner.is_alive()
    assert len(said) == 3 and all("connection was lost" in s and "trying again" in s for s in said)
    assert [(r.run_id, r.outcome) for r in results] == [(run_id, "done")]


# -- fenced effects: "did it take effect?" is asked once the old driver cannot be running it ------


class Crash(BaseException):
    """A tool runner's stand-in for a process that stops inside a call (the call stays open)."""


def in_flight_run(store: EventStore, timeout: float | None) -> None:
    """Record run1 up to a payment that started and never reported."""

    async def crashing(call: Any) -> Any:
        raise Crash

    engine = (
        payer()("Pay everyone")
        .config(AgentConfig(tool_timeout=timeout))
        .store(store)
        .run_id("run1")
        .tool_runner(crashing)
        .build()
    )
    with pytest.raises(Crash):
        engine.run()


def test_the_question_waits_for_the_old_drivers_lease_and_the_calls_timeout(
    backend: Backend,
) -> None:
    store = backend.open()
    in_flight_run(store, timeout=40.0)
    stalled = backend.open(lease=20.0)  # the driver that stalled in the call: alive, its lease on
    stalled.claim("run1")
    started = [e for e in store.read("run1") if e.kind == "ToolCallStarted"][-1].recorded_at
    mine = backend.open()
    before = mine.run("run1")
    mine.claim("run1", force=True)
    slept: list[float] = []
    with pytest.raises(HumanInputRequired) as asked:
        continue_claimed(
            mine, "run1", payer(), previous=(before.driver, before.lease_until), sleep=slept.append
        )
    assert len(slept) == 1 and started + 40.0 - time.time() <= slept[0] <= started + 40.0 + 1
    assert before.lease_until is not None and before.lease_until < started + 40.0
    request = asked.value.requests[0]
    assert request.idempotency_key == "run1-1-0" and "run1-1-0" in request.reason
    assert request.call.args == {"to": "p0"}
    assert "did it take effect" in request.reason


def test_no_wait_when_the_old_driver_is_dead_or_let_the_run_go(backend: Backend) -> None:
    store = backend.open()
    in_flight_run(store, timeout=40.0)
    script = "from eventstore import Driver; d = Driver.current(); print(d.pid, d.started)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    pid, started = done.stdout.split()
    dead = Driver(socket.gethostname(), int(pid), started)
    for previous in [(dead, time.time() + 30), None]:
        mine = backend.open()
        mine.claim("run1", force=True)
        slept: list[float] = []
        with pytest.raises(HumanInputRequired):
            continue_claimed(mine, "run1", payer(), previous=previous, sleep=slept.append)
        assert slept == []
        mine.release("run1")
