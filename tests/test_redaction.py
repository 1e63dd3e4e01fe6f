"""Redaction: a secret given to a tool, echoed by a tool or written by the LLM never reaches the
log (no row of the SQLite file, no export, no trace); the tool still gets the real value, and an
unchanged redacted run replays identical."""

from __future__ import annotations

import io
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    BuildError,
    LlmResponse,
    MockLlmCaller,
    ToolCall,
    tool,
)
from agentsm.facts import RunStarted
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import BuilderRequired, branch_run, export_run, replay_run
from replay.cli import main

SECRET = "hunter2-Zq9"
CARD = "4111 1111 1111 1111"
RECEIVED: list[dict[str, Any]] = []


@tool
def login(user: str, password: str) -> str:
    """Log a user in."""
    RECEIVED.append({"user": user, "password": password})
    if password != SECRET:
        raise PermissionError(f"wrong password {password!r} for {user}")
    return f"logged in as {user}; session for password {password} and card {CARD}"


def mask_cards(text: str) -> str:
    """Keep the last four digits of card numbers."""
    return re.sub(r"\b(?:\d{4} ){3}(\d{4})\b", r"**** \1", text)


def make_agent(task: str) -> AgentBuilder:
    script = [
        LlmResponse.tool_call("login", {"user": "ann", "password": SECRET}, id="c1"),
        LlmResponse.tool_call("login", {"user": "ann", "password": "letmein7"}, id="c2"),
        LlmResponse.final_answer(f"Logged in with {SECRET}; card {CARD} is on file."),
    ]
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script))
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(login)
        .redact(re.escape(SECRET), "letmein7", name="password")
        .redact(mask_cards)
    )


def record(db: Path) -> str:
    RECEIVED.clear()
    engine = make_agent(f"Log ann in with password {SECRET}").store(db).build()
    assert "[REDACTED]" in engine.run()
    return engine.run_id


def test_a_secret_reaches_the_tool_but_not_the_log_exports_or_traces(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db)
    assert RECEIVED == [
        {"user": "ann", "password": SECRET},
        {"user": "ann", "password": "letmein7"},
    ]  # the tools got the real arguments
    store = SQLiteEventStore(db)
    trace = Trace.load(store, run_id)
    shown = io.StringIO()
    trace.print(file=shown)
    texts = {
        "export": "\n".join(export_run(store, run_id)),
        "trace": shown.getvalue() + trace.to_json(),
    }
    store.close()
    conn = sqlite3.connect(db)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    rows = [repr(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"')]
    conn.close()
    texts["rows"] = "\n".join(rows)
    texts["files"] = b"".join(p.read_bytes() for p in tmp_path.iterdir()).decode("latin-1")
    for where, text in texts.items():
        for secret in (SECRET, "letmein7", "1111 1111 1111"):
            assert secret not in text, f"{secret!r} found in the {where}"
    assert "**** 1111" in texts["export"] and "[REDACTED]" in texts["rows"]
    facts = trace.facts()
    assert isinstance(facts[0], RunStarted)
    assert facts[0].redactions == ("password", "password", f"{__name__}.mask_cards")
    assert facts[0].task == "Log ann in with password [REDACTED]"
    failed = [e for e in trace if e.event == "ToolExecuted"][1]
    assert "PermissionError: wrong password '[REDACTED]' for ann" in failed.fact.observation  # type: ignore[union-attr]


def test_an_unchanged_redacted_run_replays_identical_with_its_builder(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db)
    report = replay_run(db, run_id, make_agent)
    assert report.identical, str(report)
    assert report.compared == len(SQLiteEventStore(db).read(run_id))
    with pytest.raises(BuilderRequired, match="redaction hooks"):
        replay_run(db, run_id)  # without the hooks, a branch would record secrets
    child = branch_run(
        db, run_id, 6, llm_response=LlmResponse.final_answer(f"It is {SECRET}!"), builder=make_agent
    )
    answers = [json.loads(e.payload) for e in SQLiteEventStore(db).read(child)]
    assert SECRET not in json.dumps(answers)


def test_the_command_line_shows_and_replays_a_redacted_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db)
    for argv in (["show", run_id], ["show", run_id, "--json"], ["export", run_id]):
        assert main(["--db", str(db), *argv]) == 0
        assert SECRET not in capsys.readouterr().out
    assert main(["--db", str(db), "replay", run_id]) == 2
    assert "pass --builder" in capsys.readouterr().err


def test_bad_hooks_are_refused_when_given() -> None:
    with pytest.raises(BuildError, match="not a regular expression"):
        AgentBuilder("t").redact("(unclosed")
    with pytest.raises(BuildError, match="a regular expression or a function"):
        AgentBuilder("t").redact(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("parallel", [True, False])
def test_calls_alike_once_redacted_each_get_their_own_real_arguments(
    tmp_path: Path, parallel: bool
) -> None:
    RECEIVED.clear()
    both = LlmResponse.tool_calls(
        [
            ToolCall(name="login", args={"user": "ann", "password": SECRET}, id="call_0"),
            ToolCall(name="login", args={"user": "ann", "password": "letmein7"}, id="call_0"),
        ]  # the same id, and the same arguments once redacted
    )
    engine = (
        AgentBuilder("log in twice")
        .llm(MockLlmCaller([both, LlmResponse.final_answer("Both logins were attempted.")]))
        .config(AgentConfig(reflect_every_n_steps=0, parallel_tools=parallel))
        .tool(login)
        .redact(re.escape(SECRET), "letmein7")
        .store(tmp_path / "runs.db")
        .build()
    )
    engine.run()
    received = [r["password"] for r in RECEIVED]
    assert (received if not parallel else sorted(received)) == (
        [SECRET, "letmein7"] if not parallel else sorted([SECRET, "letmein7"])
    )
    results = [e.observation for e in engine.memory.history]
    assert results[0].startswith("SUCCESS") and results[1].startswith("ERROR: PermissionError")
    assert SECRET not in engine.trace().to_json()
