"""Steering: a message sent to a run while it goes on, from this process (`engine.steer`) or
any other (`replay.steer`, `agentsm steer`, through the store's inbox), reaches the LLM before
its next call as a user message after the latest entries, in the order sent; it is recorded
(`Steered`) and served back by replay, which stays identical."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentEngine, HumanInputRequired, ThreadBusy
from agentsm import facts as f
from agentsm.outputs import SteerTaken
from agentsm.trace import Trace
from eventstore import Inbox, open_store
from replay import answer, assert_replays, replay_thread, resume_run, steer

from .gates import Gate, Running, agentsm, open_gate
from .outside_agent import SeeingLlm, make_agent


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gate:
    return open_gate(tmp_path, monkeypatch)


def llm_of(engine: AgentEngine) -> SeeingLlm:
    assert isinstance(engine.llm, SeeingLlm)
    return engine.llm


def heard(store: Any, run_id: str) -> list[tuple[str, str]]:
    return [
        (e.state, e.fact.text)
        for e in Trace.load(store, run_id).entries()
        if isinstance(e.fact, f.Steered)
    ]


def test_a_message_from_the_process_reaches_the_next_llm_call_in_order(
    tmp_path: Path, gate: Gate
) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    engine = make_agent("weather in Paris").store(store).build()
    running = Running(engine)
    gate.started(1)  # the LLM's first answer is being acted on: steer it
    engine.steer("give it in Celsius")
    engine.steer("and keep it short")
    gate.go(1)
    gate.go(2)
    assert running.join() == "Heard: give it in Celsius | and keep it short"
    seen = llm_of(engine).seen
    assert seen[0] == ["weather in Paris"]  # before: the task alone
    assert seen[1] == ["weather in Paris", "give it in Celsius", "and keep it short"]
    assert heard(store, engine.run_id) == [
        ("Observing", "give it in Celsius"),
        ("Observing", "and keep it short"),
    ]
    # the messages follow the step's tool result they were sent during
    messages = engine.memory.build_messages()
    roles = [(m["role"], m.get("content")) for m in messages[3:6]]
    assert roles == [
        ("tool", "SUCCESS: slow 1 done"),
        ("user", "give it in Celsius"),
        ("user", "and keep it short"),
    ]
    assert_replays(store, engine.run_id, make_agent)
    assert_replays(store, engine.run_id)  # with the recorded definition alone too
    store.close()


def test_a_message_sent_between_steps_goes_straight_into_history(tmp_path: Path) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    engine = make_agent("weather in Paris").store(store).build()
    engine.steer("before anything")  # taken at the first transition: Idle
    outputs: list[Any] = []

    async def collect() -> None:
        async for output in engine.stream():
            outputs.append(output)

    asyncio.run(collect())
    assert llm_of(engine).seen[0] == ["weather in Paris", "before anything"]
    assert [o.text for o in outputs if isinstance(o, SteerTaken)] == ["before anything"]
    assert heard(store, engine.run_id) == [("Idle", "before anything")]
    assert engine.memory.history[0].said == "user"
    assert_replays(store, engine.run_id, make_agent)
    store.close()


def test_a_message_from_another_process_reaches_the_run_mid_way(db_url: str, gate: Gate) -> None:
    store = open_store(db_url, create=True)
    engine = make_agent("weather in Paris").store(store).build()
    running = Running(engine)
    gate.started(1)
    first = agentsm("steer", engine.run_id[:6], "give it in Celsius", "--db", db_url)
    assert first.returncode == 0, first.stderr
    assert "message 1 sent to run" in first.stdout
    assert "takes it at its next transition" in first.stdout
    other = open_store(db_url)  # a second process would do the same with its own store
    assert steer(other, engine.run_id, "and keep it short") == 2
    gate.go(1)
    gate.go(2)
    assert running.join() == "Heard: give it in Celsius | and keep it short"
    assert llm_of(engine).seen[1][1:] == ["give it in Celsius", "and keep it short"]
    assert isinstance(other, Inbox) and other.pending(engine.run_id) == []  # taken
    assert [t for _, t in heard(other, engine.run_id)] == [
        "give it in Celsius",
        "and keep it short",
    ]
    assert_replays(other, engine.run_id, make_agent)
    other.close()
    store.close()


def test_a_waiting_run_takes_the_message_when_it_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    store = open_store(db, create=True)
    engine = make_agent("ask me").store(store).build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    steer(store, engine.run_id, "answer in French")
    assert heard(store, engine.run_id) == []  # nobody drives it: it waits in the inbox
    answer(store, engine.run_id, "Paris")
    final = resume_run(store, engine.run_id, make_agent)
    assert final == "Heard: SUCCESS: Paris | answer in French"
    assert heard(store, engine.run_id) == [("Observing", "answer in French")]  # after the step
    assert_replays(store, engine.run_id, make_agent)
    store.close()


def test_steering_a_thread_steers_its_turn_under_way(tmp_path: Path, gate: Gate) -> None:
    store = open_store(tmp_path / "chat.db", create=True)
    thread = make_agent("chat").store(store).thread()
    gate.go(2)
    answers: list[str] = []
    sender = threading.Thread(target=lambda: answers.append(thread.send("weather in Paris")))
    sender.start()
    gate.started(1)
    thread.steer("in Celsius please")
    gate.go(1)
    sender.join(timeout=60)
    assert answers == ["Heard: in Celsius please"]
    with pytest.raises(ThreadBusy, match="no turn is under way"):
        thread.steer("too late")
    report = replay_thread(store, thread.id, make_agent)
    assert report.identical, report
    store.close()


def test_a_run_that_ended_takes_no_message(tmp_path: Path) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    engine = make_agent("weather").store(store).build()
    engine.run()
    with pytest.raises(ValueError, match="has ended"):
        steer(store, engine.run_id, "too late")
    with pytest.raises(ValueError, match="has ended"):
        engine.steer("too late")
    with pytest.raises(ValueError, match="non-empty"):
        steer(store, engine.run_id, " ")
    done = agentsm("steer", engine.run_id, "too late", "--db", str(tmp_path / "log.db"))
    assert done.returncode == 2 and "has ended (done)" in done.stderr
    store.close()


def test_the_names_are_exported() -> None:
    import agentsm
    import replay

    assert {"RunStopped", "SteerTaken", "StopTaken"} <= set(agentsm.__all__)
    assert {"RecordedMessages", "answer", "request_stop", "steer"} <= set(replay.__all__)
