"""`agentsm serve`: conversations over HTTP. Each turn posted is recorded as `thread.send`
records it (the thread replays identical, the CLI reads it), streamed as server-sent events;
questions, approvals, steering and stops reach the turn; bad requests record nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, get_args

import pytest

pytest.importorskip("fastapi", reason="agentsm serve needs the ui extra")

import httpx  # noqa: E402

from agentsm import (  # noqa: E402
    AgentBuilder,
    AgentConfig,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    ToolContext,
    tool,
)
from agentsm.llm import emit_reasoning, emit_text  # noqa: E402
from agentsm.outputs import (  # noqa: E402
    AgentOutput,
    ApprovalNeeded,
    FinalAnswer,
    ReasoningDelta,
    RunErrored,
    SteerTaken,
    StopTaken,
    TextDelta,
    TextRetracted,
    ToolFinished,
    ToolPartial,
    ToolProgress,
    ToolStarted,
    TransitionTaken,
)
from agentsm.trace import Trace  # noqa: E402
from agentsm.types import ApprovalRequest, ToolCall  # noqa: E402
from eventstore import open_store  # noqa: E402
from replay import replay_thread  # noqa: E402
from replay.cli import main  # noqa: E402
from replay.serve import Service, create_app  # noqa: E402
from replay.serve.events import EVENTS, events_of  # noqa: E402
from replay.uvicorn_thread import bind  # noqa: E402

from . import outside_agent, thread_agent  # noqa: E402
from .gates import Gate, open_gate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
Events = list[tuple[str, dict[str, Any]]]
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def parse(body: str) -> Events:
    """The events of a `text/event-stream` body, checking that their ids count from 1."""
    events: Events = []
    for n, block in enumerate(b for b in body.split("\n\n") if b.strip()):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        assert int(fields["id"]) == n + 1, block
        assert fields["event"] in EVENTS, block
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def names(events: Events) -> list[str]:
    """The names of the events, transitions left out."""
    return [name for name, _ in main_events(events)]


def main_events(events: Events) -> Events:
    """The events, transitions left out."""
    return [e for e in events if e[0] != "transition"]


@asynccontextmanager
async def serving(
    db: str | Path, builder: Callable[[str], AgentBuilder]
) -> AsyncIterator[httpx.AsyncClient]:
    """The app on `db` with `builder`, and a client that talks to it in this event loop."""
    async with Service(db, builder) as service:
        transport = httpx.ASGITransport(app=create_app(service))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client
        await service.wait()


async def post_events(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Events:
    response = await client.post(path, json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse(response.text)


def kinds_of(db: str | Path, run_id: str) -> list[tuple[str, str]]:
    store = open_store(db)
    try:
        return [(e.state, e.event) for e in Trace.load(store, run_id).entries()]
    finally:
        store.close()


def test_a_conversation_over_http_is_recorded_as_thread_send_records_it(db_url: str) -> None:
    async def talk() -> tuple[Events, Events, dict[str, Any], list[dict[str, Any]]]:
        async with serving(db_url, thread_agent.make_agent) as client:
            made = await client.post("/threads", json={"thread_id": "trip"})
            assert made.status_code == 201 and made.json()["turns"] == 0
            first = await post_events(client, "/threads/trip/messages", {"text": "look up Oslo"})
            second = await post_events(
                client, "/threads/trip/messages", {"text": "And tomorrow?", "images": [PIXEL]}
            )
            thread = (await client.get("/threads/trip")).json()
            listed = (await client.get("/threads")).json()
            return first, second, thread, listed

    first, second, thread, listed = asyncio.run(talk())
    assert (
        "transition",
        {"from_state": "Idle", "event": "Start", "to_state": "Planning", "step": 0},
    ) in first
    first = main_events(first)
    assert names(first) == ["run", "tool_call", "tool_result", "answer", "end"]
    assert first[0][1] == {"thread_id": "trip", "run_id": "trip-1", "turn": 1}
    assert first[1][1] == {"call_id": "look-1", "name": "lookup", "args": {"city": "Oslo"}}
    assert first[2][1]["observation"] == "SUCCESS: Oslo: 21 C, sunny"
    assert first[-2][1] == {"content": "Answer 1 to 'look up Oslo'; earlier: nothing"}
    assert first[-1][1] == {
        "thread_id": "trip",
        "run_id": "trip-1",
        "status": "done",
        "answer": "Answer 1 to 'look up Oslo'; earlier: nothing",
        "error": None,
    }
    assert second[-1][1]["answer"] == "Answer 2 to 'And tomorrow?'; earlier: look up Oslo"
    assert [(r["run_id"], r["turn"], r["status"]) for r in thread["runs"]] == [
        ("trip-1", 1, "done"),
        ("trip-2", 2, "done"),
    ]
    said = [(m["role"], m["content"]) for m in thread["messages"]]
    assert said == [
        ("user", "look up Oslo"),
        ("assistant", "Answer 1 to 'look up Oslo'; earlier: nothing"),
        ("user", "And tomorrow?"),
        ("assistant", "Answer 2 to 'And tomorrow?'; earlier: look up Oslo"),
    ]
    assert thread["messages"][2]["images"][0]["media_type"] == "image/png"
    assert [(t["thread_id"], t["turns"], t["status"]) for t in listed] == [("trip", 2, "done")]

    if "://" not in db_url:  # the same messages through thread.send: the same facts
        by_hand = Path(db_url).parent / "by-hand.db"
        thread = thread_agent.make_agent("chat").store(str(by_hand)).thread("trip")
        thread.send("look up Oslo")
        thread.send("And tomorrow?", images=[PIXEL])
        for run_id in ("trip-1", "trip-2"):
            assert kinds_of(db_url, run_id) == kinds_of(by_hand, run_id)
    report = replay_thread(db_url, "trip", thread_agent.make_agent)
    assert report.identical, report


def test_the_command_line_reads_a_thread_made_over_http(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "chat.db"

    async def talk() -> None:
        async with serving(db, thread_agent.make_agent) as client:
            thread = (await client.post("/threads")).json()["thread_id"]
            await post_events(client, f"/threads/{thread}/messages", {"text": "hello"})
            await post_events(client, f"/threads/{thread}/messages", {"text": "fail"})
            await post_events(client, f"/threads/{thread}/messages", {"text": "goodbye"})

    asyncio.run(talk())
    assert main(["threads", "--db", str(db), "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    thread = listed["thread_id"]
    assert (listed["turns"], listed["status"]) == (3, "done")
    assert main(["show", "--thread", thread, "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "you: fail" in shown and "error: LLM call failed" in shown
    agent = f"{ROOT / 'tests' / 'thread_agent.py'}:make_agent"
    assert main(["replay", "--thread", thread, "--db", str(db), "--builder", agent]) == 0
    assert f"thread {thread}: 3 turns replayed, 3 identical" in capsys.readouterr().out


def test_a_failed_turn_is_streamed_and_the_thread_goes_on(tmp_path: Path) -> None:
    async def talk() -> tuple[Events, Events]:
        async with serving(tmp_path / "chat.db", thread_agent.make_agent) as client:
            await client.post("/threads", json={"thread_id": "t"})
            failed = await post_events(client, "/threads/t/messages", {"text": "fail"})
            after = await post_events(client, "/threads/t/messages", {"text": "again"})
            return failed, after

    failed, after = asyncio.run(talk())
    assert names(failed) == ["run", "error", "end"]
    assert failed[-1][1]["status"] == "failed"
    assert "the model is unavailable" in failed[-1][1]["error"]
    assert after[-1][1]["answer"] == "Answer 2 to 'again'; earlier: fail"


@tool(idempotent=True)
def fetch(pages: int, ctx: ToolContext) -> str:
    """Fetch the report's pages."""
    for page in range(1, pages + 1):
        ctx.progress(f"page {page} of {pages}")
        ctx.partial({"page": page})
    return f"{pages} pages"


def streaming_agent(task: str) -> AgentBuilder:
    """An agent whose tool reports how it goes, and whose LLM streams its reasoning and its
    answer in pieces."""

    def llm(memory: Any, tools: Any, model: str) -> LlmResponse:
        if not memory.history[memory.carried :]:
            return LlmResponse.tool_call("fetch", {"pages": 2}, id="f1")
        emit_reasoning("The pages are in.")
        for piece in ("Read ", "2 pages", "."):
            emit_text(piece)
        return LlmResponse.final_answer("Read 2 pages.")

    return (
        AgentBuilder(task)
        .llm(MockLlmCaller([llm] * 2))
        .tool(fetch)
        .config(AgentConfig(min_answer_length=1))
    )


def test_progress_text_and_reasoning_are_streamed_as_they_come(tmp_path: Path) -> None:
    async def talk() -> Events:
        async with serving(tmp_path / "chat.db", streaming_agent) as client:
            await client.post("/threads", json={"thread_id": "r"})
            return await post_events(client, "/threads/r/messages", {"text": "read it"})

    said = main_events(asyncio.run(talk()))
    tool = {"call_id": "f1", "name": "fetch"}
    assert said[1:-1] == [
        ("tool_call", {**tool, "args": {"pages": 2}}),
        ("tool_progress", {**tool, "text": "page 1 of 2"}),
        ("tool_partial", {**tool, "value": {"page": 1}}),
        ("tool_progress", {**tool, "text": "page 2 of 2"}),
        ("tool_partial", {**tool, "value": {"page": 2}}),
        ("tool_result", {**tool, "observation": "SUCCESS: 2 pages", "success": True}),
        ("reasoning", {"text": "The pages are in.", "kind": "thinking"}),
        ("text", {"text": "Read "}),
        ("text", {"text": "2 pages"}),
        ("text", {"text": "."}),
        ("answer", {"content": "Read 2 pages."}),
    ]


def test_every_output_of_the_engine_has_an_event() -> None:
    call = ToolCall(name="pay", args={"amount": 3}, id="c1")
    request = ApprovalRequest(run_id="r", step=1, call=call)
    outputs = [
        TransitionTaken("Idle", "Start", "Planning", 0),
        ToolStarted(call),
        ToolProgress(call, "half way"),
        ToolPartial(call, {"rows": [1, 2], "at": object()}),
        ToolFinished(call, "SUCCESS: paid", True),
        TextDelta("a"),
        ReasoningDelta("b"),
        TextRetracted("a", "overloaded", "b"),
        FinalAnswer("done"),
        RunErrored("no"),
        ApprovalNeeded((request, request.model_copy(update={"kind": "question"}))),
        SteerTaken("faster"),
        StopTaken("enough"),
    ]
    assert set(get_args(AgentOutput)) == {type(o) for o in outputs}  # a new output needs an event
    sent = [name for output in outputs for name, _ in events_of(output)]
    assert set(sent) | {"run", "end"} == set(EVENTS)
    for output in outputs:
        for name, payload in events_of(output):
            assert isinstance(payload, EVENTS[name])
            assert json.loads(payload.model_dump_json())  # each goes on the wire as JSON
    [(_, partial)] = events_of(outputs[3])
    assert partial.model_dump()["value"]["rows"] == [1, 2]


def test_a_question_is_answered_over_http_and_the_turn_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "ask.db"

    async def talk() -> tuple[Events, dict[str, Any], httpx.Response, Events]:
        async with serving(db, outside_agent.make_agent) as client:
            await client.post("/threads", json={"thread_id": "q"})
            asked = await post_events(client, "/threads/q/messages", {"text": "ask me"})
            thread = (await client.get("/threads/q")).json()
            busy = await client.post("/threads/q/messages", json={"text": "hello?"})
            approving = await client.post("/threads/q/decision", json={"verdict": "approved"})
            assert approving.status_code == 409
            assert "answer it (POST /threads/q/answer)" in approving.json()["detail"]
            answered = await post_events(client, "/threads/q/answer", {"text": "Lyon"})
            return asked, thread, busy, answered

    asked, thread, busy, answered = asyncio.run(talk())
    assert names(asked) == ["run", "question", "end"]
    assert main_events(asked)[1][1] == {"call_id": "ask-1", "question": "Which city?"}
    assert asked[-1][1]["status"] == "waiting"
    assert thread["pending"] == [
        {
            "kind": "question",
            "call_id": "ask-1",
            "name": "ask_human",
            "args": {"question": "Which city?"},
            "reason": "Which city?",
        }
    ]
    assert busy.status_code == 409
    assert "waits for a person: answer it (/threads/q/answer)" in busy.json()["detail"]
    assert answered[0][1] == {"thread_id": "q", "run_id": "q-1", "turn": 1}
    assert names(answered) == ["run", "tool_call", "tool_result", "answer", "end"]
    assert main_events(answered)[1][1] == {"call_id": "slow-2", "name": "slow", "args": {"n": 2}}
    assert answered[-2:] == [
        ("answer", {"content": "Heard: SUCCESS: Lyon"}),
        (
            "end",
            {
                "thread_id": "q",
                "run_id": "q-1",
                "status": "done",
                "answer": "Heard: SUCCESS: Lyon",
                "error": None,
            },
        ),
    ]
    assert replay_thread(db, "q", outside_agent.make_agent).identical


def pay_llm(memory: Any, tools: Any, model: str) -> LlmResponse:
    """Pays first (in each turn), then says what the payment came to."""
    results = [m["content"] for m in memory.build_messages() if m["role"] == "tool"]
    if not memory.history[memory.carried :]:
        return LlmResponse.tool_call("pay", {"amount": 40}, id="pay-1")
    return LlmResponse.final_answer(f"Done: {results[-1]}")


@tool
def pay(amount: int) -> str:
    """Pay the invoice."""
    return f"paid {amount} EUR"


def paying_agent(task: str) -> AgentBuilder:
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller([pay_llm] * 4))
        .tool(pay)
        .require_approval("pay")
        .config(AgentConfig(min_answer_length=1))
    )


def test_an_approval_is_decided_over_http_and_the_turn_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "pay.db"

    async def talk() -> tuple[Events, httpx.Response, httpx.Response, Events, Events]:
        async with serving(db, paying_agent) as client:
            await client.post("/threads", json={"thread_id": "p"})
            waiting = await post_events(client, "/threads/p/messages", {"text": "pay it"})
            as_answer = await client.post("/threads/p/answer", json={"text": "yes"})
            no_args = await client.post("/threads/p/decision", json={"verdict": "modified"})
            paid = await post_events(
                client, "/threads/p/decision", {"verdict": "modified", "args": {"amount": 30}}
            )
            next_turn = await post_events(client, "/threads/p/messages", {"text": "again"})
            return waiting, as_answer, no_args, paid, next_turn

    waiting, as_answer, no_args, paid, again = asyncio.run(talk())
    assert names(waiting) == ["run", "approval", "end"]
    assert main_events(waiting)[1][1] == {
        "call_id": "pay-1",
        "name": "pay",
        "args": {"amount": 40},
        "reason": "tool requires approval",
        "index": 0,
    }
    assert as_answer.status_code == 409 and "waits for a decision" in as_answer.json()["detail"]
    assert no_args.status_code == 409 and "needs `args`" in no_args.json()["detail"]
    assert names(paid) == ["run", "tool_call", "tool_result", "answer", "end"]
    assert main_events(paid)[1][1]["args"] == {"amount": 30}
    assert paid[-1][1]["answer"] == "Done: SUCCESS: paid 30 EUR"
    assert names(again)[-2:] == ["approval", "end"]  # the next turn asks again
    assert replay_thread(db, "p", paying_agent).identical


def test_a_turn_under_way_is_steered_and_stopped_then_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = open_gate(tmp_path, monkeypatch)
    db = tmp_path / "steer.db"

    async def talk() -> dict[str, Any]:
        said: dict[str, Any] = {}
        async with serving(db, outside_agent.make_agent) as client:
            await client.post("/threads", json={"thread_id": "s"})
            turn = asyncio.create_task(client.post("/threads/s/messages", json={"text": "weather"}))
            await asyncio.to_thread(gate.started, 1)  # slow(1) runs: the turn is under way
            said["busy"] = await client.post("/threads/s/messages", json={"text": "more"})
            said["resume_busy"] = await client.post("/threads/s/resume")
            said["steered"] = await client.post("/threads/s/steer", json={"text": "in Celsius"})
            said["driving"] = (await client.get("/threads/s")).json()["driving"]
            gate.go(1)
            await asyncio.to_thread(gate.started, 2)
            said["stopped"] = await client.post("/threads/s/stop", json={"reason": "enough"})
            gate.go(2)
            said["turn"] = parse((await turn).text)
            said["again"] = (await client.get("/threads/s/runs/s-1/events?after=2")).text
            said["next"] = await client.post("/threads/s/messages", json={"text": "more"})
            said["resumed"] = await post_events(client, "/threads/s/resume", {})
            said["ended"] = await client.post("/threads/s/steer", json={"text": "late"})
        return said

    said = asyncio.run(talk())
    assert said["busy"].status_code == 409
    assert "has not ended (status running)" in said["busy"].json()["detail"]
    assert said["resume_busy"].status_code == 409 and "under way here" in said["resume_busy"].text
    assert said["steered"].status_code == 202
    assert said["steered"].json() == {
        "thread_id": "s",
        "run_id": "s-1",
        "message": 1,
        "status": "running",
    }
    assert said["driving"] is True
    assert said["stopped"].json() == {"thread_id": "s", "run_id": "s-1", "stop": "requested"}
    turn = main_events(said["turn"])
    assert names(turn) == [
        "run",
        "tool_call",
        "tool_result",
        "steered",
        "tool_call",
        "tool_result",
        "stopped",
        "end",
    ]
    assert turn[3][1] == {"text": "in Celsius"}
    assert turn[-2][1] == {"reason": "enough"} and turn[-1][1]["status"] == "stopped"
    assert said["again"].startswith("id: 3\n")  # the same drive's events, read again
    assert said["next"].status_code == 409 and "resume it (/threads/s/resume)" in said["next"].text
    resumed = said["resumed"]
    assert resumed[-1][1]["status"] == "done"
    assert resumed[-1][1]["answer"] == "Heard: in Celsius"
    assert (
        said["ended"].status_code == 409
        and "post the message as the next turn" in said["ended"].json()["detail"]
    )
    assert replay_thread(db, "s", outside_agent.make_agent).identical


def test_a_server_that_stops_leaves_its_turns_stopped_and_resumable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = open_gate(tmp_path, monkeypatch)
    db = tmp_path / "log.db"

    async def talk() -> tuple[Events, Events]:
        service = Service(db, outside_agent.make_agent)
        transport = httpx.ASGITransport(app=create_app(service))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            await client.post("/threads", json={"thread_id": "x"})
            turn = asyncio.create_task(client.post("/threads/x/messages", json={"text": "hi"}))
            await asyncio.to_thread(gate.started, 1)
            await service.aclose()  # as the server stops
            cut = parse((await turn).text)
        gate.go(1)
        gate.go(2)
        async with serving(db, outside_agent.make_agent) as client:
            resumed = await post_events(client, "/threads/x/resume", {})
        return cut, resumed

    cut, resumed = asyncio.run(talk())
    assert cut[-2:] == [
        ("stopped", {"reason": "the server stopped; resume the turn to go on"}),
        (
            "end",
            {"thread_id": "x", "run_id": "x-1", "status": "stopped", "answer": None, "error": None},
        ),
    ]
    assert resumed[-1][1]["status"] == "done"
    assert replay_thread(db, "x", outside_agent.make_agent).identical


def test_a_waiting_turn_is_stopped_at_once(tmp_path: Path) -> None:
    async def talk() -> tuple[httpx.Response, Events]:
        async with serving(tmp_path / "log.db", outside_agent.make_agent) as client:
            await client.post("/threads", json={"thread_id": "w"})
            await post_events(client, "/threads/w/messages", {"text": "ask me"})
            stopped = await client.post("/threads/w/stop")
            standing = parse((await client.get("/threads/w/runs/w-1/events")).text)
            return stopped, standing

    stopped, standing = asyncio.run(talk())
    assert stopped.status_code == 202 and stopped.json()["stop"] == "stopped"
    assert standing[-1][1]["status"] == "stopped"


def test_a_turn_not_driven_here_is_followed_as_it_stands(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    thread = outside_agent.make_agent("chat").store(str(db)).thread("elsewhere")
    thread.send("weather")
    asker = outside_agent.make_agent("chat").store(str(db)).thread("asking")
    with pytest.raises(HumanInputRequired):
        asker.send("ask me")

    async def follow() -> tuple[Events, Events, Events]:
        async with serving(db, outside_agent.make_agent) as client:
            done = parse((await client.get("/threads/elsewhere/runs/elsewhere-1/events")).text)
            waiting = parse((await client.get("/threads/asking/runs/asking-1/events")).text)
            header = {"Last-Event-ID": "1"}
            later = parse_after(
                (await client.get("/threads/asking/runs/asking-1/events", headers=header)).text
            )
            return done, waiting, later

    done, waiting, later = asyncio.run(follow())
    assert names(done) == ["run", "end"] and done[-1][1]["answer"] == "Heard: nothing"
    assert names(waiting) == ["run", "question", "end"]
    assert [name for name, _ in later] == ["question", "end"]


def parse_after(body: str) -> Events:
    """The events of a stream read from the middle (their ids do not start at 1)."""
    blocks = [b for b in body.split("\n\n") if b.strip()]
    fields = [dict(line.split(": ", 1) for line in block.splitlines()) for block in blocks]
    return [(f["event"], json.loads(f["data"])) for f in fields]


def test_unknown_threads_and_runs_are_404_and_bad_bodies_422_recording_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"

    async def talk() -> dict[str, httpx.Response]:
        said: dict[str, httpx.Response] = {}
        async with serving(db, thread_agent.make_agent) as client:
            said["get"] = await client.get("/threads/nope")
            said["post"] = await client.post("/threads/nope/messages", json={"text": "hi"})
            said["steer"] = await client.post("/threads/nope/steer", json={"text": "hi"})
            await client.post("/threads", json={"thread_id": "t"})
            said["twice"] = await client.post("/threads", json={"thread_id": "t"})
            said["bad id"] = await client.post("/threads", json={"thread_id": "a b/c"})
            said["no turn"] = await client.post("/threads/t/stop")
            said["no text"] = await client.post("/threads/t/messages", json={})
            said["blank"] = await client.post("/threads/t/messages", json={"text": "  "})
            said["plain"] = await client.post(
                "/threads/t/messages", content="hi", headers={"content-type": "text/plain"}
            )
            said["file"] = await client.post(
                "/threads/t/messages", json={"text": "hi", "images": ["/etc/passwd"]}
            )
            said["verdict"] = await client.post("/threads/t/decision", json={"verdict": "maybe"})
            said["ok"] = await client.post("/threads/t/messages", json={"text": "hi"})
            said["run"] = await client.get("/threads/t/runs/t-9/events")
            said["turn"] = await client.get("/threads/t/runs/t-1")
            said["host"] = await client.get("/threads", headers={"host": "evil.example"})
        return said

    said = asyncio.run(talk())
    for key in ("get", "post", "steer"):
        assert said[key].status_code == 404, key
        assert said[key].json() == {
            "detail": f"No thread 'nope' in {db}; list the threads with GET /threads, or start "
            "one with POST /threads."
        }
    assert said["twice"].status_code == 409 and "exists already" in said["twice"].text
    assert said["no turn"].status_code == 409
    assert "no turn yet; post its first message" in said["no turn"].json()["detail"]
    for key in ("bad id", "no text", "blank", "plain", "file", "verdict"):
        assert said[key].status_code == 422, key
        assert isinstance(said[key].json()["detail"], list), key
    assert said["file"].json()["detail"][0]["loc"] == ["body", "images"]
    assert said["ok"].status_code == 200
    assert said["run"].status_code == 404
    assert said["run"].json()["detail"].startswith("Run 't-9' is no turn of thread t")
    assert said["turn"].json()["status"] == "done"
    assert said["host"].status_code == 400
    store = open_store(db)
    assert [r.run_id for r in store.runs()] == ["t-1"]  # the bad requests recorded nothing
    store.close()


def test_the_openapi_document_describes_every_endpoint_and_event(tmp_path: Path) -> None:
    with Service(tmp_path / "chat.db", thread_agent.make_agent) as service:
        document = create_app(service).openapi()
    paths = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    assert paths == {
        ("GET", "/threads"),
        ("POST", "/threads"),
        ("GET", "/threads/{thread_id}"),
        ("POST", "/threads/{thread_id}/messages"),
        ("POST", "/threads/{thread_id}/answer"),
        ("POST", "/threads/{thread_id}/decision"),
        ("POST", "/threads/{thread_id}/resume"),
        ("POST", "/threads/{thread_id}/steer"),
        ("POST", "/threads/{thread_id}/stop"),
        ("GET", "/threads/{thread_id}/runs/{run_id}"),
        ("GET", "/threads/{thread_id}/runs/{run_id}/events"),
    }
    schemas = document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert len(operation["description"]) > 40, (method, path)
            [ok] = [r for code, r in operation["responses"].items() if code.startswith("2")]
            streamed = ok.get("content", {}).get("text/event-stream")
            if path.endswith(("/messages", "/answer", "/decision", "/resume", "/events")):
                assert streamed is not None, path
                said = [e["properties"]["event"]["const"] for e in streamed["itemSchema"]["oneOf"]]
                assert said == list(EVENTS), path
                assert all(
                    f"| `{name}` |" in operation["responses"]["200"]["description"]
                    for name in EVENTS
                )
            if method == "post" and path != "/threads/{thread_id}/resume":
                body = operation["requestBody"]["content"]["application/json"]["schema"]
                assert "$ref" in body or "anyOf" in body, path
    for model in EVENTS.values():
        assert schemas[model.__name__]["description"], model
    assert {"MessageBody", "AnswerBody", "DecisionBody", "ThreadDetail", "Problem"} <= set(schemas)


def test_serve_needs_the_agent_and_listens_on_loopback_unless_told(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert main(["serve", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "[default: 127.0.0.1]" in shown and "[default: 8000]" in shown
    monkeypatch.delenv("AGENTSM_BUILDER", raising=False)
    assert main(["serve", "--db", str(tmp_path / "x.db")]) == 2
    assert "needs your agent: pass --builder module:factory" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        agent = f"{ROOT / 'tests' / 'thread_agent.py'}:make_agent"
        args = ["serve", "--builder", agent, "--db", str(tmp_path / "x.db"), "--port", str(port)]
        assert main(args) == 2
    assert capsys.readouterr().err == (
        f"agentsm: port {port} on 127.0.0.1 is in use; choose another with --port\n"
    )
    assert not (tmp_path / "x.db").exists()  # refused before the log was created
    with bind("127.0.0.1", 0) as sock:  # named TCP, so asyncio turns Nagle off per connection
        assert sock.proto == socket.IPPROTO_TCP
    for name in [m for m in sys.modules if m == "replay.serve" or m.startswith("replay.serve.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    assert main(["serve", "--builder", agent]) == 2
    assert capsys.readouterr().err == (
        "agentsm: agentsm serve needs FastAPI and uvicorn (fastapi is missing): pip install "
        "'agentsm[ui]'.\n"
    )


def test_agentsm_serve_streams_turns_over_the_network_until_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    agent = f"{ROOT / 'tests' / 'outside_agent.py'}:make_agent"
    gate = Gate(tmp_path / "gate")
    command = ["serve", "--builder", agent, "--db", str(db), "--port", "0"]
    process = subprocess.Popen(
        [sys.executable, "-m", "replay", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "AGENTSM_TEST_GATE": str(gate.folder)},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        url = first.split(" at ", 1)[1].split()[0]
        wait_for(url, process)
        with httpx.Client(base_url=url, timeout=60) as client:
            client.post("/threads", json={"thread_id": "net"})
            done: Events = []
            with client.stream("POST", "/threads/net/messages", json={"text": "weather"}) as s:
                for event in events_of_lines(s.iter_lines()):  # as they come
                    done.append(event)
                    if event[0] == "tool_call":
                        n = event[1]["args"]["n"]  # slow(n) waits until its call is seen here
                        if n == 1:
                            steered = client.post("/threads/net/steer", json={"text": "in Celsius"})
                            assert steered.status_code == 202
                        gate.go(n)
            for used in gate.folder.iterdir():  # the next turn's slow(1) waits again
                used.unlink()
            cut: Events = []
            with client.stream("POST", "/threads/net/messages", json={"text": "weather"}) as s:
                for event in events_of_lines(s.iter_lines()):
                    cut.append(event)
                    if event[0] == "tool_call":
                        process.send_signal(signal.SIGINT)  # Ctrl-C while the turn runs
        gate.go(1)  # the tool's thread ends; the process exits
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert done[-1] == (
        "end",
        {
            "thread_id": "net",
            "run_id": "net-1",
            "status": "done",
            "answer": "Heard: in Celsius",
            "error": None,
        },
    )
    assert cut[-2:] == [
        ("stopped", {"reason": "the server stopped; resume the turn to go on"}),
        (
            "end",
            {
                "thread_id": "net",
                "run_id": "net-2",
                "status": "stopped",
                "answer": None,
                "error": None,
            },
        ),
    ]
    assert (process.returncode, err.strip()) == (130, "agentsm: interrupted.")  # as Ctrl-C does
    assert first.startswith(f"agentsm serve: {agent} on {db} at http://127.0.0.1:")
    store = open_store(db)
    assert store.run("net-2").status == "stopped"
    store.close()
    assert replay_thread(db, "net", outside_agent.make_agent).identical


def wait_for(url: str, process: subprocess.Popen[str]) -> None:
    """Until the server at `url` accepts connections (or its process has ended)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.communicate()
        with socket.socket() as probe:
            if probe.connect_ex((host, int(port))) == 0:
                return
        assert time.monotonic() < deadline, "agentsm serve never listened"
        time.sleep(0.05)


def events_of_lines(lines: Any) -> Any:
    """The events of a stream, one at a time, as its lines arrive."""
    fields: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(": ")
            fields[name] = value
        elif fields:
            yield fields["event"], json.loads(fields["data"])
            fields = {}
