"""Questions to a person: the `ask_human` tool (`.ask_human()`) and a handler's `ctx.ask` put
the run in waiting with the question (a request of kind "question" among `pending_requests`);
`replay.answer`, `agentsm answer`, the viewer, the approval callback and workers continue it;
the answer is recorded, becomes the call's result (or `ctx.ask`'s value) and is served back by
replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder, Event, HumanInputRequired, RunContext, State
from agentsm import facts as f
from agentsm.trace import Trace
from eventstore import EventStore, open_store
from replay import answer, assert_replays, decide, pending_requests, request_stop, resume_run
from replay.worker import Worker

from .gates import agentsm
from .outside_agent import SeeingLlm, make_agent


def facts_of(store: EventStore, run_id: str, *kinds: type) -> list[Any]:
    return [e.fact for e in Trace.load(store, run_id).entries() if isinstance(e.fact, kinds)]


def test_the_llm_asks_a_person_and_the_answer_is_the_calls_result(tmp_path: Path) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    engine = make_agent("ask me").store(store).build()
    with pytest.raises(HumanInputRequired) as waiting:
        engine.run()
    (request,) = waiting.value.requests
    assert (request.kind, request.reason, request.call.name) == (
        "question",
        "Which city?",
        "ask_human",
    )
    assert store.run(engine.run_id).status == "waiting"
    assert pending_requests(store, engine.run_id) == [request]
    with pytest.raises(ValueError, match="answer it"):  # a question is answered, not approved
        decide(store, engine.run_id, "approved")
    done = answer(store, engine.run_id, "Lyon")
    assert (done.status, done.waiting, done.request.reason) == ("ready", (), "Which city?")
    assert store.run(engine.run_id).status == "ready"
    assert pending_requests(store, engine.run_id) == []
    assert resume_run(store, engine.run_id, make_agent) == "Heard: SUCCESS: Lyon"
    (decided,) = facts_of(store, engine.run_id, f.HumanDecided)
    assert decided.decisions[0].verdict == "answered" and decided.decisions[0].answer == "Lyon"
    assert engine.definition.questions == ("ask_human",)
    assert_replays(store, engine.run_id, make_agent)
    assert_replays(store, engine.run_id)  # with the recorded definition alone too
    store.close()


def test_answered_on_the_command_line_a_worker_goes_on(db_url: str) -> None:
    store = open_store(db_url, create=True)
    run_id = make_agent("ask me").store(store).submit()
    first = Worker(store, make_agent).run_once()
    assert first is not None and first.outcome == "waiting" and "Which city?" in first.detail
    shown = agentsm("resume", run_id, "--db", db_url, "--builder", "tests.outside_agent:make_agent")
    assert shown.returncode == 3, shown.stderr
    assert "question #1 [ask-1]: Which city?" in shown.stdout
    assert f"Answer with: agentsm answer {run_id} TEXT" in shown.stdout
    answered = agentsm("answer", run_id[:6], "Marseille", "--db", db_url)
    assert answered.returncode == 0, answered.stderr
    assert "answered 'Which city?'" in answered.stdout and "status ready" in answered.stdout
    again = agentsm("answer", run_id, "Nice", "--db", db_url)
    assert again.returncode == 2 and "asked no question that waits" in again.stderr
    result = Worker(store, make_agent).run_once()
    assert result is not None and (result.claimed, result.outcome) == ("ready", "done")
    assert result.detail == "Heard: SUCCESS: Marseille"
    assert_replays(store, run_id, make_agent)
    store.close()


def test_the_approval_callback_answers_at_once(tmp_path: Path) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    asked: list[Any] = []

    def person(request: Any) -> str:
        asked.append(request)
        return "Toulouse"

    engine = make_agent("ask me").store(store).on_approval(person).build()
    assert engine.run() == "Heard: SUCCESS: Toulouse"
    assert [(r.kind, r.reason) for r in asked] == [("question", "Which city?")]
    assert_replays(store, engine.run_id, make_agent)
    declined = make_agent("ask me").store(store).on_approval(lambda r: False).build()
    assert "HumanRejected" in declined.run()  # the LLM is told the person declined
    wrong = make_agent("ask me").store(store).on_approval(lambda r: True).build()
    with pytest.raises(Exception, match="return the answer as text"):
        wrong.run()
    store.close()


def asking_agent(task: str) -> AgentBuilder:
    """The outside agent, whose Idle handler asks who is asking before anything (`ctx.ask`)."""
    said: list[str] = []

    async def greet(ctx: RunContext) -> str:
        name = await ctx.ask("Who is asking?")
        place = await ctx.ask(f"Where are you, {name}?")
        said.append(f"{name} in {place}")
        return Event.Start

    builder = make_agent(task).handler(State.Idle, greet)
    builder.said = said  # type: ignore[attr-defined]
    return builder


def test_a_handler_asks_and_goes_on_with_the_answers(tmp_path: Path) -> None:
    store = open_store(tmp_path / "log.db", create=True)
    engine = asking_agent("weather").store(store).build()
    with pytest.raises(HumanInputRequired) as waiting:
        engine.run()
    (request,) = waiting.value.requests
    assert (request.kind, request.reason, request.index) == ("question", "Who is asking?", -1)
    assert pending_requests(store, engine.run_id) == [request]
    with pytest.raises(ValueError, match="waits for an answer to its question .Who is asking"):
        decide(store, engine.run_id, "approved")
    assert answer(store, engine.run_id, "Ada").status == "ready"
    with pytest.raises(HumanInputRequired) as again:  # the handler asks its next question
        resume_run(store, engine.run_id, asking_agent)
    assert again.value.requests[0].reason == "Where are you, Ada?"
    assert request_stop(store, engine.run_id) == "stopped"  # stopped while it waits
    answer(store, engine.run_id, "Paris")
    resumed = asking_agent("weather")
    assert resume_run(store, engine.run_id, lambda task: resumed) == "Heard: nothing"
    assert resumed.said == ["Ada in Paris"]  # type: ignore[attr-defined]
    questions = facts_of(store, engine.run_id, f.QuestionAsked, f.HumanAnswered)
    assert [type(x).__name__ for x in questions] == [
        "QuestionAsked",
        "HumanAnswered",
        "QuestionAsked",
        "HumanAnswered",
    ]
    assert_replays(store, engine.run_id, asking_agent)
    store.close()


def test_the_viewer_answers_a_question_and_stops_a_run(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the web viewer needs the ui extra")
    from fastapi.testclient import TestClient

    from replay.ui import Viewer, create_app

    db = str(tmp_path / "log.db")
    store = open_store(db, create=True)
    engine = make_agent("ask me").store(store).build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    other = make_agent("ask me too").store(store).build()
    with pytest.raises(HumanInputRequired):
        other.run()
    store.close()
    viewer = Viewer(db, allow_write=True, builder=make_agent)
    with TestClient(create_app(viewer), base_url="http://127.0.0.1") as api:  # type: ignore[arg-type]
        detail = api.get(f"/api/runs/{engine.run_id}").json()
        (waiting,) = detail["waiting"]
        assert (waiting["kind"], waiting["reason"]) == ("question", "Which city?")
        done = api.post(f"/api/runs/{engine.run_id}/answer", json={"text": "Nantes"}).json()
        assert done["answered"] == "Which city?" and done["resumed"] is True
        viewer.running[engine.run_id].join(timeout=60)
        detail = api.get(f"/api/runs/{engine.run_id}").json()
        assert detail["run"]["status"] == "done"
        assert detail["run"]["answer"] == "Heard: SUCCESS: Nantes"
        stopped = api.post(f"/api/runs/{other.run_id}/stop", json={}).json()
        assert stopped["stop"] == "stopped"
        assert api.get(f"/api/runs/{other.run_id}").json()["run"]["status"] == "stopped"
    with TestClient(create_app(Viewer(db)), base_url="http://127.0.0.1") as read_only:  # type: ignore[arg-type]
        refused = read_only.post(f"/api/runs/{other.run_id}/answer", json={"text": "x"})
        assert refused.status_code == 403
    with open_store(db) as store:
        assert_replays(store, engine.run_id, make_agent)


def test_seen_by_the_llm_as_a_tool_result(tmp_path: Path) -> None:
    llm = SeeingLlm()
    engine = (
        make_agent("ask me").llm(llm).store(str(tmp_path / "log.db")).on_approval(lambda r: "Metz")
    ).build()
    engine.run()
    messages = engine.memory.build_messages()
    tool = next(m for m in messages if m["role"] == "tool")
    assert (tool["name"], tool["content"], tool["is_error"]) == (
        "ask_human",
        "SUCCESS: Metz",
        False,
    )
