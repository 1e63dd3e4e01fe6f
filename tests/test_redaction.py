"""Redaction: a secret given to a tool, echoed by a tool or written by the LLM never reaches the
log (no row of the SQLite file, no export, no trace); the tool still gets the real value, and an
unchanged redacted run replays identical."""

from __future__ import annotations

import io
import json
import re
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentsm import (
    AgentBuilder,
    AgentConfig,
    BuildError,
    CustomFact,
    LlmResponse,
    McpServer,
    MockLlmCaller,
    RunContext,
    State,
    ToolCall,
    build_transition_table,
    tool,
)
from agentsm.codec import UnknownFact
from agentsm.facts import Candidate, RunBranched, RunFinished, RunStarted, ToolCallStarted
from agentsm.redaction import Redactor
from agentsm.trace import Trace
from agentsm.transitions import TransitionTable
from agentsm.types import McpServerSpec, ToolSchema
from eventstore import SQLiteEventStore
from replay import BuilderRequired, Variant, Verdict, best_of, branch_run, export_run, replay_run
from replay.cli import main
from replay.otel import export_spans

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
    ).run_id
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


# -- by shape: every string of every fact, whatever its field is called ------------------------


def test_every_string_is_redacted_keys_of_free_objects_too_and_a_call_keeps_its_real_args() -> None:
    redactor = Redactor.of([(None, re.escape(SECRET))])
    args = {SECRET: [f"a {SECRET}", {"deep": SECRET}], "n": 1}
    call = ToolCall(name="t", args=args, id="c1")
    recorded = redactor.fact(ToolCallStarted(index=None, call=call)).call
    assert recorded is not None and SECRET not in json.dumps(recorded.model_dump())
    assert dict(recorded.args) == {"[REDACTED]": ["a [REDACTED]", {"deep": "[REDACTED]"}], "n": 1}
    assert redactor.reveal(recorded).args == args  # the tool still gets the real ones
    branched = RunBranched(parent_id="p", parent_seq=3, tool_result=f"SUCCESS: {SECRET}")
    assert redactor.fact(branched).tool_result == "SUCCESS: [REDACTED]"
    spec = McpServerSpec(name="srv", transport="stdio", command="srv", args=("--key", SECRET))
    started = RunStarted(
        task="t", task_type="default", system_prompt="", config=AgentConfig(), tools=()
    ).model_copy(update={"mcp_servers": (spec,)})
    assert redactor.fact(started).mcp_servers[0].args == ("--key", "[REDACTED]")
    unknown = UnknownFact(kind="Elsewhere", payload={"note": SECRET, SECRET: 2})
    assert redactor.fact(unknown).payload == {"note": "[REDACTED]", "[REDACTED]": 2}


def test_fixed_choices_are_kept_whatever_the_hooks_match(tmp_path: Path) -> None:
    engine = (
        AgentBuilder("say you are done")
        .llm(MockLlmCaller([LlmResponse.final_answer("All done, nothing is left to do.")]))
        .redact(r"\bdone\b")  # RunFinished.status is "done": a code, not text
        .store(tmp_path / "runs.db")
        .build()
    )
    assert engine.run() == "All [REDACTED], nothing is left to do."
    assert engine.trace().facts()[-1] == RunFinished(
        status="done", final_answer="All [REDACTED], nothing is left to do."
    )
    assert SQLiteEventStore(tmp_path / "runs.db").run(engine.run_id).status == "done"


def test_a_branchs_tool_result_is_redacted_as_its_tool_result(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db)
    child = branch_run(db, run_id, 7, tool_result=f"leaked {SECRET}", builder=make_agent).run_id
    payloads = [e.payload for e in SQLiteEventStore(db).read(child)]
    assert SECRET not in "".join(payloads)
    assert any('"tool_result":"SUCCESS: leaked [REDACTED]"' in p for p in payloads)


def test_a_sub_agent_runs_under_its_parents_hooks_and_replays_identical(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    def child(task: str) -> AgentBuilder:  # no hooks of its own
        return AgentBuilder(task).llm(MockLlmCaller([LlmResponse.final_answer(f"did {task}")]))

    def parent(task: str) -> AgentBuilder:
        script = [
            LlmResponse.tool_call("helper", {"task": f"use key {SECRET}"}, id="c1"),
            LlmResponse.final_answer("The helper is finished with it."),
        ]
        return (
            AgentBuilder(task)
            .llm(MockLlmCaller(script))
            .subagent("helper", "Does a part of the work.", child)
            .redact(re.escape(SECRET), name="key")
        )

    engine = parent("delegate").store(db).run_id("p").build()
    engine.run()
    store = SQLiteEventStore(db)
    child_run = store.run("p-1-0")
    assert child_run.task == "use key [REDACTED]" and child_run.summary.answer is not None
    assert SECRET not in child_run.summary.answer
    definition = Trace.load(store, "p-1-0").facts()[0]
    assert isinstance(definition, RunStarted) and definition.redactions == ("key",)
    for run_id in ("p", "p-1-0"):
        assert SECRET not in "\n".join(export_run(store, run_id))
    report = replay_run(db, "p", parent, children=True)
    assert report.identical, str(report)
    assert [c.identical for c in report.children] == [True]


def test_a_judgement_run_is_redacted_with_the_agents_hooks(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db)

    def judge(candidates: tuple[Candidate, ...]) -> Verdict:
        return Verdict(0, reason=f"the first, which knows {SECRET}")

    variants = [
        Variant(answer=f"The password is {SECRET}, as asked.", label="a"),
        Variant(answer="I have no idea what it is, sorry."),
    ]
    judged = best_of(db, run_id, 21, variants, judge, builder=make_agent)
    assert judged.pick == 0 and judged.reason == "the first, which knows [REDACTED]"
    store = SQLiteEventStore(db)
    for record_ in store.runs():
        assert SECRET not in "\n".join(export_run(store, record_.run_id))
    assert replay_run(db, judged.judgement_id).identical


def test_spans_without_content_name_error_classes_only(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    db = tmp_path / "runs.db"
    run_id = record(db)  # a tool fails with an error message naming ann
    export_spans(SQLiteEventStore(db), run_id, tracer_provider=provider)
    finished = exporter.get_finished_spans()
    failed = [s for s in finished if s.status.description]
    assert [s.status.description for s in failed] == ["PermissionError"]
    assert "ann" not in json.dumps(_span_texts(finished))
    provider.shutdown()


def _span_texts(spans: Sequence[ReadableSpan]) -> list[Any]:
    """Everything a span says: its name, attributes, status and events."""
    return [
        [
            s.name,
            {k: str(v) for k, v in (s.attributes or {}).items()},
            s.status.description,
            [[e.name, {k: str(v) for k, v in (e.attributes or {}).items()}] for e in s.events],
        ]
        for s in spans
    ]


# -- a secret planted anywhere a run can hold text is nowhere in what is stored or shown ---------

PLANTED = "Qx7Secret9Zk"
PLACES = (
    "task",
    "system_prompt",
    "tool_args",
    "tool_arg_key",
    "tool_result",
    "llm_text",
    "custom_fact",
    "mcp_args",
    "mcp_url",
    "subagent_task",
)


class SecretNoted(CustomFact):
    """A user's own fact with free text."""

    kind: Literal["SecretNoted"] = "SecretNoted"
    summary: str
    tags: tuple[str, ...] = ()


def _note(notes: tuple[str, ...], fact: SecretNoted) -> tuple[str, ...]:
    return (*notes, fact.summary)


class NotingState:
    """Between Observing and Planning: notes the last observation (and a planted text)."""

    name: ClassVar[str] = "Noting"
    emits: ClassVar[frozenset[str]] = frozenset({"Noted"})
    records: ClassVar[frozenset[Any]] = frozenset({SecretNoted})

    def __init__(self, extra: str) -> None:
        self.extra = extra

    async def handle(self, ctx: RunContext) -> str:
        last = ctx.memory.history[-1].observation if ctx.memory.history else ""
        ctx.record(SecretNoted(summary=f"saw {last} {self.extra}", tags=(self.extra,)))
        return "Noted"


def _planted_agent(places: frozenset[str], text: Callable[[str], str]) -> AgentBuilder:
    """An agent that holds `text(place)` at each place: the secret where planted."""
    args: dict[str, Any] = {"q": text("tool_args")}
    args[text("tool_arg_key")] = 1
    result = text("tool_result")

    def echo(given: dict[str, Any]) -> str:
        return f"echoed {given} and {result}"

    def child(task: str) -> AgentBuilder:
        return (
            AgentBuilder(task)
            .llm(MockLlmCaller([LlmResponse.final_answer(f"I did: {task}")]))
            .config(AgentConfig(reflect_every_n_steps=0, min_answer_length=0))
        )

    script = [
        LlmResponse.tool_call("echo", args, id="c1"),
        LlmResponse.tool_call("helper", {"task": f"help with {text('subagent_task')}"}, id="c2"),
        LlmResponse.final_answer(f"Finished: {text('llm_text')}"),
    ]
    rows = dict(build_transition_table())
    rows[(State.Observing, "Continue")] = "Noting"
    rows[("Noting", "Noted")] = State.Planning
    stdio = McpServerSpec(
        name="files", transport="stdio", command="files-server", args=("--key", text("mcp_args"))
    )
    http = McpServerSpec(name="web", transport="http", url=f"http://127.0.0.1:9/{text('mcp_url')}")

    def schema(name: str) -> ToolSchema:
        return ToolSchema(name=name, description="Read a page.", input_schema={"type": "object"})

    return (
        AgentBuilder(f"Please {text('task')}")
        .system_prompt(f"You are careful. {text('system_prompt')}")
        .llm(MockLlmCaller(script))
        .config(AgentConfig(reflect_every_n_steps=0, min_answer_length=0))
        .tool("echo", "Echo the arguments.", {"type": "object"}, echo)
        .subagent("helper", "Does a part of the work.", child)
        .mcp_server(McpServer.recorded(stdio, [schema("read_file")]))
        .mcp_server(McpServer.recorded(http, [schema("read_page")]))
        .transitions(TransitionTable(rows))
        .handler("Noting", NotingState(text("custom_fact")))
        .fact(SecretNoted, _note, part="notes", initial=[])
        .redact(re.escape(PLANTED), name="planted")
    )


def _everything_shown(db: Path, run_ids: list[str]) -> dict[str, str]:
    """The text of every place a log reaches: exports, the search index, spans without
    content, the viewer's API."""
    from fastapi.testclient import TestClient

    from replay.ui import Viewer, create_app

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    shown: dict[str, str] = {}
    with SQLiteEventStore(db) as store:
        shown["export"] = "\n".join(line for r in run_ids for line in export_run(store, r))
        store.index_for_search()
        shown["search"] = repr([store.search(w) for w in (PLANTED, "Secret", "echoed")])
        for run_id in run_ids:
            export_spans(store, run_id, tracer_provider=provider)
        shown["spans"] = json.dumps(_span_texts(exporter.get_finished_spans()))
        shown["catalog"] = repr(store.runs())
    provider.shutdown()
    with TestClient(create_app(Viewer(str(db))), base_url="http://127.0.0.1") as api:
        paths = ["/api/runs", "/api/search?q=echoed"]
        for run_id in run_ids:
            last = len(api.get(f"/api/runs/{run_id}").json()["facts"])
            paths += [
                f"/api/runs/{run_id}",
                f"/api/runs/{run_id}/timeline",
                f"/api/runs/{run_id}/lineage",
                f"/api/runs/{run_id}/memory?seq={last}",
                f"/api/runs/{run_id}/conversation?seq={last}",
            ]
        shown["viewer"] = "\n".join(api.get(path).text for path in paths)
    shown["files"] = b"".join(p.read_bytes() for p in db.parent.iterdir()).decode("latin-1")
    return shown


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    places=st.sets(st.sampled_from(PLACES), min_size=1),
    around=st.tuples(st.text("ab -:/", max_size=3), st.text("ab -:/", max_size=3)),
)
def test_a_planted_secret_is_nowhere_in_the_log_or_what_is_made_of_it(
    places: set[str], around: tuple[str, str]
) -> None:
    pytest.importorskip("fastapi", reason="the web viewer needs the ui extra")

    def text(place: str) -> str:
        return f"{around[0]}{PLANTED}{around[1]}" if place in places else f"plain {place}"

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "runs.db"
        with SQLiteEventStore(db) as store:
            engine = _planted_agent(frozenset(places), text).store(store).run_id("p").build()
            assert engine.run().startswith("Finished: ")
            run_ids = [r.run_id for r in store.runs()]
            assert sorted(run_ids) == ["p", "p-2-0"]  # the sub-agent ran, under the parent's hooks
            held = b"".join(p.read_bytes() for p in Path(folder).iterdir())  # the -wal too
            assert Path(f"{db}-wal").exists()
            assert PLANTED.encode() not in held
        for where, shown in _everything_shown(db, run_ids).items():
            assert PLANTED not in shown, f"the planted secret is in the {where}"
