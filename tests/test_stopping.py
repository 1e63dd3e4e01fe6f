"""Stopping from outside: `replay.request_stop`, `agentsm stop`, the viewer's button or
`engine.request_stop`. The process that drives the run (in-process, or a worker on another
host) stops it at its next transition, status stopped, recorded (`StopRequested`); a run nobody
drives is stopped at once. `agentsm resume` finishes it, and replay stays identical."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agentsm import HumanInputRequired
from agentsm import facts as f
from agentsm.errors import RunStopped
from agentsm.outputs import StopTaken
from agentsm.trace import Trace
from eventstore import EventStore, open_store
from replay import answer, assert_replays, request_stop, resume_run
from replay.worker import Worker, WorkResult

from .gates import Gate, Running, agentsm, open_gate
from .outside_agent import make_agent


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gate:
    return open_gate(tmp_path, monkeypatch)


def kinds(store: EventStore, run_id: str) -> list[str]:
    return [e.kind for e in store.read(run_id)]


def stops(store: EventStore, run_id: str) -> list[tuple[str, str]]:
    return [
        (e.state, e.fact.reason)
        for e in Trace.load(store, run_id).entries()
        if isinstance(e.fact, f.StopRequested)
    ]


def test_a_worker_stops_a_run_another_process_asked_to_stop(db_url: str, gate: Gate) -> None:
    store = open_store(db_url, create=True)
    run_id = make_agent("weather in Paris").store(store).submit()
    results: list[WorkResult | None] = []
    worker = threading.Thread(
        target=lambda: results.append(Worker(store, make_agent).run_once()), daemon=True
    )
    worker.start()
    gate.started(1)  # the worker is inside a slow tool call
    asked = agentsm("stop", run_id[:6], "--reason", "wrong city", "--db", db_url)
    assert asked.returncode == 0, asked.stderr
    assert "stop requested: its driver stops it at its next transition" in asked.stdout
    assert store.run(run_id).status == "running"  # not yet: the tool is still running
    gate.go(1)
    worker.join(timeout=60)
    result = results[0]
    assert result is not None and (result.outcome, result.detail) == ("stopped", "wrong city")
    record = store.run(run_id)
    assert record.status == "stopped" and record.driver is None
    assert stops(store, run_id) == [("Observing", "wrong city")]  # after the slow call's step
    assert kinds(store, run_id)[-1] == "StopRequested"
    assert_replays(store, run_id, make_agent)  # identical up to where it stopped
    gate.go(2)
    assert resume_run(store, run_id, make_agent) == "Heard: nothing"  # goes on from there
    assert store.run(run_id).status == "done"
    assert_replays(store, run_id, make_agent)  # stopped and resumed, replayed identical
    store.close()


def test_an_engine_in_a_process_stops_when_another_store_asks(db_url: str, gate: Gate) -> None:
    store = open_store(db_url, create=True)
    engine = make_agent("weather in Paris").store(store).build()
    running = Running(engine)
    gate.started(1)
    other = open_store(db_url)
    assert request_stop(other, engine.run_id) == "requested"
    gate.go(1)
    with pytest.raises(RunStopped, match="stopped where it was asked to"):
        running.join()
    assert other.run(engine.run_id).status == "stopped"
    gate.go(2)
    assert resume_run(other, engine.run_id, make_agent) == "Heard: nothing"
    assert_replays(other, engine.run_id, make_agent)
    other.close()
    store.close()


def test_a_run_nobody_drives_is_stopped_at_once(tmp_path: Path) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    queued = make_agent("weather").store(store).submit()
    assert request_stop(store, queued, "not today") == "stopped"
    assert store.run(queued).status == "stopped"
    assert stops(store, queued) == [("Idle", "not today")]
    assert Worker(store, make_agent).run_once() is None  # a stopped run is nobody's work
    assert resume_run(store, queued, make_agent) == "Heard: nothing"
    assert_replays(store, queued, make_agent)

    engine = make_agent("ask me").store(store).build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    assert request_stop(store, engine.run_id) == "stopped"
    assert request_stop(store, engine.run_id) == "stopped"  # again: nothing more
    assert stops(store, engine.run_id) == [("WaitingForHuman", "")]
    with pytest.raises(HumanInputRequired):  # resumed, it waits for its answer again
        resume_run(store, engine.run_id, make_agent)
    answer(store, engine.run_id, "Lyon")
    assert resume_run(store, engine.run_id, make_agent) == "Heard: SUCCESS: Lyon"
    assert_replays(store, engine.run_id, make_agent)

    done = agentsm("stop", engine.run_id, "--db", str(tmp_path / "log.db"))
    assert done.returncode == 2 and "has ended (done)" in done.stderr
    store.close()


def test_an_answered_run_stops_at_its_first_transition(tmp_path: Path) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    engine = make_agent("ask me").store(store).build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    answer(store, engine.run_id, "Lyon")  # ready: a worker may take it at any moment
    assert request_stop(store, engine.run_id) == "requested"
    assert Worker(store, make_agent).run_once() is not None
    assert store.run(engine.run_id).status == "stopped"
    assert stops(store, engine.run_id) == [("Observing", "")]
    assert resume_run(store, engine.run_id, make_agent) == "Heard: SUCCESS: Lyon"
    assert_replays(store, engine.run_id, make_agent)
    store.close()


def test_a_stop_asked_in_the_process_stops_the_stream(tmp_path: Path, gate: Gate) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    engine = make_agent("weather").store(store).build()
    outputs: list[object] = []

    async def watch() -> None:
        async for output in engine.stream():
            outputs.append(output)

    def stop_soon() -> None:
        gate.started(1)
        engine.request_stop("enough")
        gate.go(1)

    stopper = threading.Thread(target=stop_soon)
    stopper.start()
    asyncio.run(watch())
    stopper.join()
    assert [o.reason for o in outputs if isinstance(o, StopTaken)] == ["enough"]
    assert store.run(engine.run_id).status == "stopped"
    gate.go(2)
    assert resume_run(store, engine.run_id, make_agent) == "Heard: nothing"
    assert_replays(store, engine.run_id, make_agent)
    store.close()
