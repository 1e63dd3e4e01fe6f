"""The web viewer's threads: the list (as `agentsm threads` gives it), one thread as a
conversation with its turns' runs, what was said while they ran and what they wait on, where a
branched thread came from and the threads branched from one; thread turns in the runs list and
the family tree. Called with httpx through FastAPI's TestClient on real logs."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web viewer needs the ui extra")

from fastapi.testclient import TestClient  # noqa: E402

from agentsm import (  # noqa: E402
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    HumanInputRequired,
    LlmResponse,
    tool,
)
from eventstore import SQLiteEventStore  # noqa: E402
from replay import branch_thread, request_stop, resume_run, steer  # noqa: E402
from replay.cli import main  # noqa: E402
from replay.cli.threads import THREAD_KEYS  # noqa: E402
from replay.ui import Viewer, create_app  # noqa: E402


class TalkingLlm:
    """Answers from the conversation it is sent: "ask ..." asks a person first, "look up
    CITY" calls the lookup tool first, "fail" fails."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        users = [m["content"] for m in memory.build_messages() if m["role"] == "user"]
        own = [h for h in memory.history[memory.carried :] if h.tool is not None]
        task = memory.task
        if task == "fail":
            raise RuntimeError("the model is unavailable")
        if task.startswith("ask") and not any(h.tool.name == "ask_human" for h in own):
            return LlmResponse.tool_call("ask_human", {"question": "Which city?"}, id="ask-1")
        if task.startswith("look up ") and not own:
            return LlmResponse.tool_call("lookup", {"city": task[8:]}, id="look-1")
        return LlmResponse.final_answer(f"Answer {len(users)} to {task!r}")


@tool(idempotent=True)
def lookup(city: str) -> str:
    """Look a city's weather up."""
    return f"{city}: 21 C, sunny"


def make_agent(task: str) -> AgentBuilder:
    return (
        AgentBuilder(task)
        .system_prompt("You help.")
        .llm(TalkingLlm())
        .tool(lookup)
        .ask_human()
        .config(AgentConfig(min_answer_length=1, reflect_every_n_steps=0))
    )


def client(db: Path, **settings: object) -> TestClient:
    return TestClient(create_app(Viewer(str(db), **settings)), base_url="http://127.0.0.1")  # type: ignore[arg-type]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """A log with thread "trip" (three turns, the second calling a tool) and thread "rome",
    branched from it at turn 2 with another message."""
    db = tmp_path / "chat.db"
    with SQLiteEventStore(db) as store:
        thread = make_agent("chat").store(store).thread("trip")
        for text in ("Hello", "look up Oslo", "Thanks"):
            thread.send(text)
    branch_thread(str(db), "trip", 2, "look up Rome", make_agent, new_thread_id="rome")
    return db


@pytest.fixture
def api(log: Path) -> Iterator[TestClient]:
    with client(log) as c:
        yield c


def test_the_threads_list_is_what_agentsm_threads_gives_last_updated_first(
    api: TestClient, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = api.get("/api/threads").json()
    assert main(["threads", "--db", str(log), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert page["threads"] == list(reversed(cli))  # the same fields and values, newest first
    assert list(page["threads"][0]) == list(THREAD_KEYS)
    assert [t["thread_id"] for t in page["threads"]] == ["rome", "trip"]
    rome, trip = page["threads"]
    assert (rome["turns"], rome["branched_from"], rome["branch_turn"]) == (2, "trip", 2)
    assert (trip["turns"], trip["status"], trip["last_run"]) == (3, "done", "trip-3")
    assert trip["answer"] == "Answer 3 to 'Thanks'" and trip["branched_from"] is None
    first = api.get("/api/threads", params={"limit": 1}).json()
    second = api.get("/api/threads", params={"limit": 1, "offset": first["next_offset"]}).json()
    assert [first["threads"][0]["thread_id"], second["threads"][0]["thread_id"]] == ["rome", "trip"]
    assert second["next_offset"] is None


def test_a_thread_is_its_turns_in_order_each_with_its_run(api: TestClient) -> None:
    detail = api.get("/api/threads/trip").json()
    assert detail["thread"]["thread_id"] == "trip" and detail["thread"]["turns"] == 3
    turns = detail["turns"]
    talk = [(t["turn"], t["message"], t["answer"], t["status"], t["run_id"]) for t in turns]
    assert talk == [
        (1, "Hello", "Answer 1 to 'Hello'", "done", "trip-1"),
        (2, "look up Oslo", "Answer 2 to 'look up Oslo'", "done", "trip-2"),
        (3, "Thanks", "Answer 3 to 'Thanks'", "done", "trip-3"),
    ]
    assert [(c["name"], c["args"], c["success"]) for c in turns[1]["calls"]] == [
        ("lookup", {"city": "Oslo"}, True)
    ]
    assert all(not t["shared"] and t["waiting"] == [] and t["error"] is None for t in turns)
    assert [t["parent_id"] for t in turns] == [None, "trip-1", "trip-2"]
    for t in turns:  # each turn's run is the run page's
        run = api.get(f"/api/runs/{t['run_id']}").json()
        assert run["run"]["thread"]["turn"] == t["turn"] and run["last_seq"] == t["last_seq"]
    (branch,) = detail["branches"]
    assert (branch["thread_id"], branch["at_turn"]) == ("rome", 2)
    assert branch["message"] == "look up Rome"
    assert branch["status"] == "done" and branch["turns"] == 2


def test_a_branched_thread_says_where_it_came_from_and_shares_the_turns_before(
    api: TestClient,
) -> None:
    detail = api.get("/api/threads/rome").json()
    assert (detail["thread"]["branched_from"], detail["thread"]["branch_turn"]) == ("trip", 2)
    first, second = detail["turns"]
    assert (first["run_id"], first["thread_id"], first["shared"]) == ("trip-1", "trip", True)
    assert (second["run_id"], second["thread_id"], second["shared"]) == ("rome-2", "rome", False)
    assert second["message"] == "look up Rome" and second["parent_id"] == "trip-1"
    assert second["answer"] == "Answer 2 to 'look up Rome'"
    assert detail["branches"] == []


def test_thread_turns_in_the_runs_list_and_the_family_say_which_turn_of_which_thread(
    api: TestClient,
) -> None:
    runs = {r["run_id"]: r for r in api.get("/api/runs").json()["runs"]}
    ended = api.get("/api/runs/trip-1").json()["last_seq"]
    assert runs["trip-2"]["thread"] == {
        "id": "trip",
        "turn": 2,
        "previous": "trip-1",
        "previous_seq": ended,
    }
    assert (runs["trip-2"]["parent_id"], runs["trip-2"]["branch_seq"]) == ("trip-1", ended)
    assert runs["rome-2"]["thread"]["branched_from"] == "trip"
    assert runs["rome-2"]["parent_id"] == "trip-1"  # the lineage: a fork at turn 1
    family = api.get("/api/runs/trip-3/lineage").json()["family"]
    placed = [(r["run_id"], r["depth"], r["thread"]["turn"], r["changes"]) for r in family]
    assert sorted(placed) == [
        ("rome-2", 1, 2, []),
        ("trip-1", 0, 1, []),
        ("trip-2", 1, 2, []),
        ("trip-3", 2, 3, []),
    ]


def test_a_waiting_turn_shows_what_it_asks_and_what_was_said_while_it_ran(log: Path) -> None:
    with SQLiteEventStore(log) as store:
        thread = make_agent("chat").store(store).thread("trip")
        with pytest.raises(HumanInputRequired):
            thread.send("ask me where")
    run_id = "trip-4"
    steer(str(log), run_id, "in Celsius, please")
    assert request_stop(str(log), run_id, "lunch") == "stopped"  # nobody drives it: at once
    with client(log, allow_write=True) as api:
        turn = api.get("/api/threads/trip").json()["turns"][-1]
        assert (turn["run_id"], turn["status"], turn["answer"]) == (run_id, "stopped", None)
        assert turn["waiting"] == [
            {
                "number": 1,
                "call_id": "ask-1",
                "name": "ask_human",
                "args": {"question": "Which city?"},
                "reason": "Which city?",
                "kind": "question",
            }
        ]
        assert [(d["kind"], d["text"]) for d in turn["during"]] == [("stop", "lunch")]
        answered = api.post(f"/api/runs/{run_id}/answer", json={"text": "Lyon", "call": "#1"})
        assert answered.status_code == 200, answered.text
        assert resume_run(str(log), run_id, make_agent) == "Answer 5 to 'ask me where'"
        detail = api.get("/api/threads/trip").json()
    turn = detail["turns"][-1]
    assert (turn["status"], turn["waiting"], turn["answer"]) == (
        "done",
        [],
        "Answer 5 to 'ask me where'",
    )
    assert [(d["kind"], d["text"]) for d in turn["during"]] == [
        ("stop", "lunch"),
        ("question", "Which city?"),
        ("answer", "Lyon"),
        ("steer", "in Celsius, please"),
    ]
    assert turn["calls"] == []  # a question to a person is no tool run
    assert detail["thread"]["status"] == "done" and detail["thread"]["turns"] == 4


def test_a_failed_turn_shows_its_error_and_the_thread_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    with SQLiteEventStore(db) as store:
        thread = make_agent("chat").store(store).thread("t")
        thread.send("Hello")
        with pytest.raises(AgentFailed):
            thread.send("fail")
        thread.send("Again")
    with client(db) as api:
        turns = api.get("/api/threads/t").json()["turns"]
    assert [t["status"] for t in turns] == ["done", "failed", "done"]
    assert turns[1]["answer"] is None and "the model is unavailable" in turns[1]["error"]
    assert turns[2]["answer"] == "Answer 3 to 'Again'"


def test_an_unknown_thread_is_404_with_one_line(api: TestClient) -> None:
    answer = api.get("/api/threads/nosuchthread")
    assert answer.status_code == 404
    detail = answer.json()["detail"]
    assert "no thread 'nosuchthread'" in detail and "agentsm threads" in detail
    assert "\n" not in detail


def test_a_log_with_no_thread_lists_none(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    assert main(["demo", "--db", str(db)]) == 0
    with client(db) as api:
        assert api.get("/api/threads").json() == {"threads": [], "offset": 0, "next_offset": None}
        runs = api.get("/api/runs").json()["runs"]
    assert runs and all(r["thread"] is None for r in runs)


def test_a_turn_changed_after_it_was_recorded_is_409_with_the_message(log: Path) -> None:
    conn = sqlite3.connect(log)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(  # the log is in format 2: the facts table, the run by its key
        "UPDATE facts SET payload = replace(payload, 'Answer 2 to', 'Forged 2 to') "
        "WHERE run = (SELECT key FROM runs WHERE run_id = 'trip-2')"
    )
    conn.commit()
    conn.close()
    with client(log) as api:
        assert api.get("/api/threads").status_code == 200  # the catalog alone
        assert api.get("/api/threads/rome").status_code == 200  # shares turn 1 only
        for path in ("/api/threads/trip", "/api/runs/trip-2"):
            answer = api.get(path)
            assert answer.status_code == 409, path
            detail = answer.json()["detail"]
            assert detail.startswith("Run trip-2's log was changed after it was recorded"), path
            assert "Forged" not in detail


def test_the_thread_endpoints_are_documented_and_the_page_ships(api: TestClient) -> None:
    schema = api.get("/openapi.json").json()
    assert {"/api/threads", "/api/threads/{thread}"} <= set(schema["paths"])
    page = api.get("/").text
    assert "/static/threads.js" in page and 'href="#/threads"' in page
    script = api.get("/static/threads.js")
    assert script.status_code == 200 and "function threadPage" in script.text
