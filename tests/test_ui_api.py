"""The web viewer's JSON API, called with httpx through FastAPI's TestClient on real logs."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web viewer needs the ui extra")

import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from agentsm import (  # noqa: E402
    AgentBuilder,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    build_transition_table,
)
from eventstore import Searchable, SQLiteEventStore  # noqa: E402
from replay import decide, memory_at  # noqa: E402
from replay.cli import main  # noqa: E402
from replay.demo import demo_agent  # noqa: E402
from replay.ui import Viewer, create_app  # noqa: E402

from .stores import connect  # noqa: E402
from .ui_agent import ANSWER, make_agent  # noqa: E402


@pytest.fixture
def demo_log(tmp_path: Path) -> str:
    db = str(tmp_path / "demo.db")
    assert main(["demo", "--db", db]) == 0
    return db


def client(db: str, **settings: object) -> TestClient:
    return TestClient(create_app(Viewer(db, **settings)), base_url="http://127.0.0.1")  # type: ignore[arg-type]


@pytest.fixture
def api(demo_log: str) -> Iterator[TestClient]:
    with client(demo_log) as c:
        yield c


def waiting_run(db: str) -> str:
    with SQLiteEventStore(db) as store:
        engine = make_agent("pay the invoice").store(store).build()
        with pytest.raises(HumanInputRequired) as waiting:
            engine.run()
        return waiting.value.run_id


def parent_and_branch(api: TestClient) -> tuple[dict[str, object], dict[str, object]]:
    runs = api.get("/api/runs").json()["runs"]
    branch = next(r for r in runs if r["parent_id"])
    parent = next(r for r in runs if r["run_id"] == branch["parent_id"])
    return parent, branch


def test_runs_are_listed_newest_first_filtered_and_paged(api: TestClient) -> None:
    page = api.get("/api/runs").json()
    assert len(page["runs"]) == 2 and page["next_offset"] is None
    assert page["runs"][0]["created_at"] >= page["runs"][1]["created_at"]
    first = api.get("/api/runs", params={"limit": 1}).json()
    second = api.get("/api/runs", params={"limit": 1, "offset": first["next_offset"]}).json()
    assert [first["runs"][0]["run_id"], second["runs"][0]["run_id"]] == [
        r["run_id"] for r in page["runs"]
    ]
    assert second["next_offset"] is None
    assert api.get("/api/runs", params={"task": "CAPITAL"}).json()["runs"]
    assert api.get("/api/runs", params={"task": "nothing like it"}).json()["runs"] == []
    assert api.get("/api/runs", params={"model": "demo-model", "status": "done"}).json()["runs"]
    assert api.get("/api/runs", params={"since": "1h"}).json()["runs"]
    bad = api.get("/api/runs", params={"status": "sleeping"})
    assert bad.status_code == 400 and "use one of" in bad.json()["detail"]


def test_one_run_has_its_facts_its_path_and_its_timeline(api: TestClient) -> None:
    parent, _ = parent_and_branch(api)
    run_id = str(parent["run_id"])
    detail = api.get(f"/api/runs/{run_id[:6]}").json()  # a prefix is enough
    assert detail["run"]["run_id"] == run_id and detail["state"] == "Done"
    kinds = [f["kind"] for f in detail["facts"]]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    assert [f["seq"] for f in detail["facts"]] == list(range(1, detail["last_seq"] + 1))
    diagram = api.get(f"/api/runs/{run_id}/diagram").json()
    names = {s["name"] for s in diagram["states"]}
    assert {"Idle", "Planning", "WaitingForHuman", "Done", "Error"} <= names
    assert diagram["path"][0] == {"seq": 2, "from": "Idle", "event": "Start", "to": "Planning"}
    assert diagram["path"][-1]["to"] == "Done"
    taken = {(e["from"], e["to"]): e["taken"] for e in diagram["edges"]}
    assert taken[("Planning", "Acting")] >= 1 and taken[("Planning", "WaitingForHuman")] == 0
    assert all(0 <= s["x"] <= diagram["width"] for s in diagram["states"])
    timeline = api.get(f"/api/runs/{run_id}/timeline").json()
    assert [s["state"] for s in timeline["states"]][:2] == ["Idle", "Planning"]
    assert timeline["llm"][0]["input_tokens"] == 412 and timeline["llm"][0]["latency_ms"] >= 0
    tools = {t["name"]: t for t in timeline["tools"]}
    assert tools["search"]["success"] and tools["search"]["duration_ms"] >= 0


def test_memory_and_conversation_at_a_seq_match_the_cli(
    api: TestClient, demo_log: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parent, _ = parent_and_branch(api)
    run_id = str(parent["run_id"])
    detail = api.get(f"/api/runs/{run_id}").json()
    asked = next(f["seq"] for f in detail["facts"][5:] if f["kind"] == "LlmRequested")
    memory = api.get(f"/api/runs/{run_id}/memory", params={"seq": asked}).json()
    expected, state = memory_at(demo_log, run_id, asked)
    assert memory["state"] == state and memory["memory"] == expected.model_dump(mode="json")
    talk = api.get(f"/api/runs/{run_id}/conversation", params={"seq": asked}).json()
    assert talk["request_seq"] == asked and "as sent by the LLM request" in talk["note"]
    cli = ["memory", run_id, "--at", str(asked), "--messages", "--json", "--db", demo_log]
    assert main(cli) == 0
    assert talk["messages"] == json.loads(capsys.readouterr().out)
    out = api.get(f"/api/runs/{run_id}/memory", params={"seq": 999})
    assert out.status_code == 400 and "give a seq from 1 to" in out.json()["detail"]


def test_lineage_and_diff_say_where_the_branch_parted_and_what_it_changed(
    api: TestClient,
) -> None:
    parent, branch = parent_and_branch(api)
    family = api.get(f"/api/runs/{branch['run_id']}/lineage").json()["family"]
    assert [(r["run_id"], r["depth"]) for r in family] == [
        (parent["run_id"], 0),
        (branch["run_id"], 1),
    ]
    assert family[1]["branch_seq"] == branch["branch_seq"] and family[1]["changes"]
    diff = api.get("/api/diff", params={"a": parent["run_id"], "b": branch["run_id"]}).json()
    assert diff["relation"] == f"B branched from A at seq {branch['branch_seq']}"
    assert diff["facts_a"][0]["kind"] == diff["facts_b"][0]["kind"] == "LlmResponded"
    assert diff["facts_a"][0]["summary"] != diff["facts_b"][0]["summary"]
    answers = next(o for o in diff["outcomes"] if o["field"] == "answer")
    assert answers["a"] == parent["answer"] and answers["b"] == branch["answer"]


def test_search_finds_facts_of_a_sqlite_log(demo_log: str) -> None:
    with SQLiteEventStore(demo_log) as store:
        store.index_for_search()
    with client(demo_log) as api:
        found = api.get("/api/search", params={"q": "Paris inhabitants"}).json()
    assert found["available"] and found["hits"]
    assert all(set(h) == {"run_id", "seq", "kind", "snippet"} for h in found["hits"])


def test_search_finds_facts_on_either_backend(log_url: str) -> None:
    store = connect(log_url)
    with pytest.raises(HumanInputRequired) as waiting:
        make_agent("pay the quarterly invoice").store(store).build().run()
    with client(log_url) as api:  # the viewer reads it read-only: facts not indexed yet
        assert api.get("/api/info").json()["search"] is True
        read = api.get("/api/search", params={"q": "quarterly"}).json()
    assert read["unindexed"] > 0 and read["hits"]  # read one by one
    assert isinstance(store, Searchable)
    store.index_for_search()
    with client(log_url) as api:
        found = api.get("/api/search", params={"q": "quarterly"}).json()
    assert found["available"] is True and found["unindexed"] == 0
    hits = [(h["run_id"], h["kind"]) for h in found["hits"]]
    assert (waiting.value.run_id, "RunStarted") in hits
    assert any("[quarterly]" in h["snippet"] for h in found["hits"])


def test_unknown_runs_are_404_with_one_line(api: TestClient) -> None:
    answer = api.get("/api/runs/nosuchrun")
    assert answer.status_code == 404
    assert "nosuchrun" in answer.json()["detail"] and "\n" not in answer.json()["detail"]


def test_the_api_is_documented(api: TestClient) -> None:
    schema = api.get("/openapi.json").json()
    for path in (
        "/api/runs",
        "/api/search",
        "/api/runs/{run}",
        "/api/runs/{run}/diagram",
        "/api/runs/{run}/timeline",
        "/api/runs/{run}/memory",
        "/api/runs/{run}/conversation",
        "/api/runs/{run}/lineage",
        "/api/diff",
        "/api/runs/{run}/live",
        "/api/runs/{run}/decision",
        "/api/runs/{run}/branch",
    ):
        assert path in schema["paths"], path
    assert api.get("/api/docs").status_code == 200


def test_the_page_ships_in_the_package_with_a_strict_policy(api: TestClient) -> None:
    page = api.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    names = ("app.js", "dom.js", "pictures.js", "runs.js", "run.js", "diff.js")
    for name in (*names, "style.css"):
        assert f"/static/{name}" in page.text and api.get(f"/static/{name}").status_code == 200
    scripts = "".join(api.get(f"/static/{n}").text for n in names)
    assert "innerHTML" not in scripts and "insertAdjacentHTML" not in scripts
    assert "http://" not in scripts.replace("http://www.w3.org/2000/svg", "")


def test_other_host_names_are_refused(api: TestClient) -> None:
    rebound = api.get("/api/runs", headers={"host": "evil.example:8765"})
    assert rebound.status_code == 400


def test_writes_are_refused_unless_allowed(demo_log: str) -> None:
    run_id = waiting_run(demo_log)
    with client(demo_log) as api:
        before = api.get(f"/api/runs/{run_id}").json()
        refused = api.post(f"/api/runs/{run_id}/decision", json={"verdict": "approved"})
        assert refused.status_code == 403 and "--allow-write" in refused.json()["detail"]
        branched = api.post(f"/api/runs/{run_id}/branch", json={"at": 3, "answer": "x"})
        assert branched.status_code == 403
        assert api.get(f"/api/runs/{run_id}").json() == before
    with client(demo_log, allow_write=True) as api:
        form = api.post(
            f"/api/runs/{run_id}/decision",
            content="verdict=approved",
            headers={"content-type": "text/plain"},
        )
        assert form.status_code in (415, 422)  # refused before anything is read
        assert api.get(f"/api/runs/{run_id}").json()["last_seq"] == before["last_seq"]


def test_a_decision_is_recorded_as_the_cli_records_it(tmp_path: Path) -> None:
    ui_db, cli_db = str(tmp_path / "ui.db"), str(tmp_path / "cli.db")
    ui_run, cli_run = waiting_run(ui_db), waiting_run(cli_db)
    with client(ui_db, allow_write=True) as api:
        waiting = api.get(f"/api/runs/{ui_run}").json()["waiting"]
        assert [w["name"] for w in waiting] == ["pay"] and waiting[0]["args"] == {"amount": 12}
        done = api.post(
            f"/api/runs/{ui_run}/decision", json={"verdict": "approved", "note": "ok"}
        ).json()
        assert done["decided"] == [{"call_id": "p1", "verdict": "approved"}]
        assert done["resumed"] is False and "agentsm resume" in done["next"]
        again = api.post(f"/api/runs/{ui_run}/decision", json={"verdict": "approved"})
        assert again.status_code == 400 and "not waiting" in again.json()["detail"]
    decide(cli_db, cli_run, "approved", note="ok")

    def recorded(db: str, run_id: str) -> list[tuple[str, object]]:
        with SQLiteEventStore(db, read_only=True) as store:
            return [(e.kind, e.payload) for e in store.read(run_id)]

    assert recorded(ui_db, ui_run) == recorded(cli_db, cli_run)


def test_with_the_builder_an_approved_run_goes_on_to_its_answer(tmp_path: Path) -> None:
    db = str(tmp_path / "pay.db")
    run_id = waiting_run(db)
    viewer = Viewer(db, allow_write=True, builder=make_agent)
    with TestClient(create_app(viewer), base_url="http://127.0.0.1") as api:
        done = api.post(f"/api/runs/{run_id}/decision", json={"verdict": "approved"}).json()
        assert done["resumed"] is True
        viewer.running[run_id].join(timeout=60)
        detail = api.get(f"/api/runs/{run_id}").json()
    assert detail["run"]["status"] == "done" and detail["run"]["answer"].startswith(ANSWER)


def test_a_branch_from_the_page_is_the_cli_branch(demo_log: str) -> None:
    with client(demo_log, allow_write=True) as api:
        parent, _ = parent_and_branch(api)
        facts = api.get(f"/api/runs/{parent['run_id']}").json()["facts"]
        at = next(f["seq"] for f in facts if f["kind"] == "LlmRequested")
        change = {"at": at, "answer": "Paris, <i>surely</i>."}
        made = api.post(f"/api/runs/{parent['run_id']}/branch", json=change).json()
        assert made["status"] == "done" and made["answer"] == "Paris, <i>surely</i>."
        new = api.get(f"/api/runs/{made['run_id']}").json()["run"]
        assert new["parent_id"] == parent["run_id"]
        nothing = api.post(f"/api/runs/{parent['run_id']}/branch", json={"at": at})
        assert nothing.status_code == 400
        assert made["point"] < at and made["moved"]  # inside a step: moved back, and said so
        assert [e["source"] for e in made["effects"]] == ["given"]
        started = [f["seq"] for f in facts if f["kind"] == "ToolCallStarted"][1]  # 2 at once
        other = {"at": started - 1, "tool_result": "Paris has 11 million people."}
        stopped = api.post(f"/api/runs/{parent['run_id']}/branch", json=other).json()
        assert stopped["status"] == "stopped" and stopped["answer"] is None
        assert [e["source"] for e in stopped["effects"]] == ["given", "reused", "needed"]
        assert stopped["needs"][0].startswith("needs a live LLM at seq ")
        assert "viewer started with --builder" in stopped["warnings"][0]
        live = api.post(f"/api/runs/{parent['run_id']}/branch", json={**other, "live": True})
        assert live.status_code == 400 and "--builder" in live.json()["detail"]


def test_a_branch_from_the_page_goes_live_with_the_viewers_agent(demo_log: str) -> None:
    with client(demo_log, allow_write=True, builder=demo_agent) as api:
        parent, _ = parent_and_branch(api)
        facts = api.get(f"/api/runs/{parent['run_id']}").json()["facts"]
        started = [f["seq"] for f in facts if f["kind"] == "ToolCallStarted"][1]  # 2 at once
        change = {"at": started - 1, "tool_result": "Paris: 11 million.", "live": True}
        needs_tools = api.post(f"/api/runs/{parent['run_id']}/branch", json=change).json()
        assert needs_tools["status"] == "stopped" and "live tools" in needs_tools["needs"][0]
        change["live_tools"] = True
        made = api.post(f"/api/runs/{parent['run_id']}/branch", json=change).json()
        assert made["status"] == "done" and not made["needs"]
        assert {e["source"] for e in made["effects"]} == {"given", "reused", "live"}


def test_live_facts_stream_until_the_run_ends(tmp_path: Path) -> None:
    db = str(tmp_path / "pay.db")
    run_id = waiting_run(db)
    decide(db, run_id, "approved")
    with SQLiteEventStore(db) as store:
        waited = store.run(run_id).last_seq
        make_agent("pay the invoice").store(store).attach(run_id).run()
        last = store.run(run_id).last_seq
    with client(db) as api, api.stream("GET", f"/api/runs/{run_id}/live?after={waited}") as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        events = [line for line in s.iter_lines() if line.startswith(("event:", "data:"))]
    seqs = [json.loads(line[5:])["seq"] for line in events if line.startswith('data: {"')]
    assert seqs == list(range(waited + 1, last + 1))
    assert events[-2:] == ["event: end", "data: {}"]


def test_ui_on_a_missing_log_is_one_line_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ui", "--db", str(tmp_path / "none.db"), "--no-open", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("agentsm: No database at") and "\n" not in err
    assert not (tmp_path / "none.db").exists()


def test_ui_on_a_port_in_use_is_one_line_before_serving(
    demo_log: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--db", demo_log, "--no-open", "--port", str(port)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"agentsm: port {port} on 127.0.0.1 is in use; choose another with --port\n"


def test_ui_listens_on_loopback_unless_told(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", "--help"]) == 0
    assert "[default: 127.0.0.1]" in capsys.readouterr().out


def custom_agent(task: str) -> AgentBuilder:
    """The README's agent with a state of its own (Verifying) after every observation."""
    table = (
        build_transition_table()
        .without_rows(("Observing", "Continue"))
        .with_rows(
            {
                ("Observing", "Continue"): "Verifying",
                ("Verifying", "Verified"): "Planning",
                ("Verifying", "Rejected"): "Planning",
            }
        )
    )
    script = [
        LlmResponse.tool_call("echo", {"text": task}),
        LlmResponse.final_answer("Said hi, and it was verified."),
    ]
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script))
        .tool("echo", "Echo text", {"type": "object"}, lambda args: str(args))
        .transitions(table)
        .handler("Verifying", lambda ctx: "Verified")
    )


def test_the_diagram_is_the_runs_own_table(tmp_path: Path) -> None:
    db = str(tmp_path / "custom.db")
    with SQLiteEventStore(db) as store:
        engine = custom_agent("say hi").store(store).build()
        engine.run()
        run_id = engine.run_id
    with client(db) as api:
        diagram = api.get(f"/api/runs/{run_id}/diagram").json()
    edges = {(e["from"], e["to"]): e for e in diagram["edges"]}
    assert edges[("Observing", "Verifying")]["taken"] == 1
    assert edges[("Verifying", "Planning")]["events"] == ["Verified"]  # the one it took
    assert "Continue" not in edges.get(("Observing", "Planning"), {"events": []})["events"]
    assert "--builder" in diagram["note"]
    with client(db, builder=custom_agent) as api:
        diagram = api.get(f"/api/runs/{run_id}/diagram").json()
    edges = {(e["from"], e["to"]): e for e in diagram["edges"]}
    assert sorted(edges[("Verifying", "Planning")]["events"]) == ["Rejected", "Verified"]
    assert "your agent" in diagram["note"]


def test_redacted_text_is_all_the_viewer_shows(tmp_path: Path) -> None:
    db = str(tmp_path / "secret.db")
    script = [
        LlmResponse.tool_call("echo", {"text": "password hunter2"}),
        LlmResponse.final_answer("Logged in with hunter2."),
    ]
    with SQLiteEventStore(db) as store:
        engine = (
            AgentBuilder("log in with hunter2")
            .llm(MockLlmCaller(script))
            .tool("echo", "Echo text", {"type": "object"}, lambda args: str(args))
            .redact(r"hunter2", name="password")
            .store(store)
            .build()
        )
        engine.run()
        run_id = engine.run_id
        last = store.run(run_id).last_seq
    with client(db) as api:
        bodies = [
            api.get(path).text
            for path in (
                "/api/runs",
                f"/api/runs/{run_id}",
                f"/api/runs/{run_id}/timeline",
                f"/api/runs/{run_id}/lineage",
                *(f"/api/runs/{run_id}/memory?seq={seq}" for seq in range(1, last + 1)),
                *(f"/api/runs/{run_id}/conversation?seq={seq}" for seq in range(1, last + 1)),
            )
        ]
    assert "[REDACTED]" in bodies[1]
    assert not [body for body in bodies if "hunter2" in body]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_agentsm_ui_serves_the_log_until_interrupted(demo_log: str) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "replay", "ui", "--db", demo_log, "--port", str(port), "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # ready once the port accepts connections
            assert process.poll() is None, process.communicate()
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "agentsm ui never listened"
            time.sleep(0.05)
        runs = httpx.get(f"http://127.0.0.1:{port}/api/runs").json()["runs"]
        assert len(runs) == 2
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert f"(read-only) on http://127.0.0.1:{port}" in out
    assert "Traceback" not in err
