"""Replay that helps when code changes: a changed definition is reported on its own and replay
goes on comparing behaviour, LLM requests included, to the first fact the new definition
changes (or says the behaviour is identical); error texts are compared without process noise;
runs that need the user's builder say so; `replay --all` replays every run whatever happens to
one of them."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar
from unittest.mock import patch

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentMemory,
    HandlerCrashed,
    LlmResponse,
    MockLlmCaller,
    RunContext,
    ToolCall,
    ToolOutcome,
    ToolRegistry,
    tool,
)
from agentsm.states import ReflectingState, reflecting
from eventstore import NewEvent, SQLiteEventStore
from replay import BuilderRequired, UnusedChange, assert_replays, branch_run, replay_run
from replay.cli import main


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


ALIVE: list[object] = []  # so that no two objects of these tests share an address


def volatile() -> str:
    """Text that differs between two executions: an object's address and the task's name."""
    ALIVE.append(object())
    return f"{ALIVE[-1]} in {asyncio.current_task().get_name()}"  # type: ignore[union-attr]


@tool
async def flaky(key: str) -> str:
    """Fail with a message that differs between two executions."""
    raise RuntimeError(f"lookup of {key} failed: {volatile()}")


SCRIPT = [
    LlmResponse.tool_call("lookup", {"key": "a"}, id="c1"),
    LlmResponse.tool_call("flaky", {"key": "b"}, id="c2"),
    LlmResponse.tool_call("lookup", {"key": "c"}, id="c3"),
    LlmResponse.final_answer("The values of a and c are known now."),
]


def agent(task: str, *, max_steps: int = 5, prompt: str = "Be brief.") -> AgentBuilder:
    return (
        AgentBuilder(task)
        .system_prompt(prompt)
        .llm(MockLlmCaller(list(SCRIPT)))
        .config(AgentConfig(reflect_every_n_steps=0, max_steps=max_steps))
        .tool(lookup)
        .tool(flaky)
    )


def record(db: Path, builder: AgentBuilder, *, crashes: bool = False) -> str:
    """Record a run; only a run meant to crash may end in HandlerCrashed."""
    engine = builder.store(db).build()
    if crashes:
        with pytest.raises(HandlerCrashed):
            engine.run()
    else:
        engine.run()
    return engine.run_id


def test_a_max_steps_edit_is_reported_at_seq_1_and_replay_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, agent("find a and c"))
    more = replay_run(db, run_id, lambda t: agent(t, max_steps=10))
    assert more.definition_change is not None and more.definition_change.fields == [
        "config.max_steps"
    ]
    assert more.same_behaviour and not more.identical  # nothing else changed: the user can tell
    fewer = replay_run(db, run_id, lambda t: agent(t, max_steps=2))
    assert fewer.definition_change is not None and fewer.divergence is not None
    assert fewer.divergence.seq > 1
    assert fewer.divergence.actual is not None and fewer.divergence.actual.event == "RunFailed"
    assert "config.max_steps" in str(fewer) and "first divergence at seq" in str(fewer)


def test_a_reworded_prompt_diverges_at_its_first_request_and_diffs_show_text_as_text(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, agent("find a and c"))
    report = replay_run(db, run_id, lambda t: agent(t, prompt="Sé breve, por favor: 東京."))
    assert report.definition_change is not None and report.divergence is not None
    assert report.divergence.seq == seq_of(db, run_id, "LlmRequested")
    assert "the LLM request changed: messages" in report.divergence.headline()
    assert '+      "content": "Sé breve, por favor: 東京."' in report.divergence.diff
    assert '-      "content": "Be brief."' in report.divergence.diff
    assert "Sé breve, por favor: 東京." in report.definition_change.diff
    assert "\\u" not in report.definition_change.diff + report.divergence.diff


def crashing_planning(ctx: RunContext) -> str:
    raise ValueError(f"cannot plan: {volatile()}")


def test_an_aborted_run_replays_identical_when_it_aborts_the_same_way(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    def crashing(task: str) -> AgentBuilder:
        return agent(task).handler("Planning", crashing_planning)

    run_id = record(db, crashing("crash"), crashes=True)
    aborted = SQLiteEventStore(db).read(run_id)[-1]
    assert aborted.kind == "RunAborted" and "0x" in aborted.payload and "Task-" in aborted.payload
    report = replay_run(db, run_id, crashing)
    assert report.identical, str(report)


def test_runs_with_their_own_handlers_need_the_builder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"

    plain = record(db, agent("plain run"))
    custom = record(db, agent("custom run").handler("Observing", lambda ctx: "Continue"))
    with pytest.raises(BuilderRequired, match="its own handlers for Observing"):
        replay_run(db, custom)
    with pytest.raises(BuilderRequired, match="its own handlers for Observing"):
        branch_run(db, custom, 3, llm_response=LlmResponse.final_answer("Another answer."))
    store = SQLiteEventStore(db)
    store.create_run("damaged", "a run that cannot be read")
    store.append("damaged", 0, [NewEvent("Bogus", json.dumps({"kind": "Bogus"}), "{}", 0.0)])
    store.close()
    assert main(["--db", str(db), "replay", "--all"]) == 2
    shown = capsys.readouterr().out
    assert f"{plain}  identical" in shown
    assert f"{custom}  needs --builder: its own handlers for Observing" in shown
    assert "damaged  FAILED: " in shown
    assert "3 runs replayed: 1 identical, 0 diverged, 1 need --builder, 1 failed" in shown


def test_memory_json_prints_sets_sorted_in_the_cli_and_the_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    names = [f"tool_{c}" for c in "qwertyuiopasdfgh"]
    builder = agent("find a and c")
    for name in names:
        builder.blacklist_tool(name)
    run_id = record(db, builder)
    assert main(["--db", str(db), "memory", run_id, "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert memory["blacklisted_tools"] == sorted(names)
    rebuilt = AgentMemory.rebuild(SQLiteEventStore(db), run_id)[0]
    assert json.loads(rebuilt.model_dump_json())["blacklisted_tools"] == sorted(names)


def observing(version: int, seen: list[bool]) -> Callable[[RunContext], str]:
    """The Observing handler, before (1) and after (2) a deliberate change guarded by
    `ctx.patched`: version 2 asks twice, to show the marker is recorded once."""

    def handle(ctx: RunContext) -> str:
        seen.append(version == 2 and ctx.patched("commit-v2") and ctx.patched("commit-v2"))
        return "Continue"

    return handle


def test_patched_keeps_old_runs_on_their_old_path(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    seen: list[bool] = []

    def version(n: int) -> Callable[[str], AgentBuilder]:
        return lambda task: agent(task).handler("Observing", observing(n, seen))

    old = record(db, version(1)("recorded before the change"))
    new = record(db, version(2)("recorded after the change"))
    new_facts = SQLiteEventStore(db).read(new)
    assert [e.kind for e in new_facts].count("PatchMarked") == 1  # the first time only
    assert seen == [False] * 3 + [True] * 3  # live runs take the new path
    seen.clear()
    assert replay_run(db, old, version(2)).identical  # no marker: patched() is False
    assert seen == [False] * 3
    assert replay_run(db, new, version(2)).identical  # the marker is there: the new path
    assert seen == [False] * 3 + [True] * 3
    assert not replay_run(db, new, version(1)).same_behaviour  # the change, taken out, shows
    memory = AgentMemory.rebuild(SQLiteEventStore(db), new)[0]
    assert memory.patches == frozenset({"commit-v2"})


def reflecting_agent(task: str) -> AgentBuilder:
    script = [
        LlmResponse.tool_call("lookup", {"key": "a"}, id="c1"),
        LlmResponse.final_answer("A summary: the value of a is known."),  # the reflection
        LlmResponse.final_answer("The value of a is known now, as looked up."),
    ]
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script))
        .config(AgentConfig(reflect_every_n_steps=1))
        .tool(lookup)
    )


def seq_of(db: Path, run_id: str, kind: str, nth: int = 0) -> int:
    return [e.seq for e in SQLiteEventStore(db).read(run_id) if e.kind == kind][nth]


def test_a_branch_whose_change_was_never_used_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, reflecting_agent("find a"))
    last = SQLiteEventStore(db).run(run_id).last_seq
    answer = LlmResponse.final_answer("Another answer, long enough.")
    with pytest.warns(UnusedChange, match="made no LLM call after the branch point"):
        branch_run(db, run_id, last, llm_response=answer)
    with pytest.warns(UnusedChange, match="ran no tool after the branch point"):
        branch_run(db, run_id, last, tool_result="another result")
    before_reflection = seq_of(db, run_id, "LlmRequested", 1) - 1
    with pytest.warns(UnusedChange, match="was a reflection, so the answer given became"):
        child = branch_run(db, run_id, before_reflection, llm_response=answer).run_id
    summary = [e for e in SQLiteEventStore(db).read(child) if e.kind == "HistoryCompressed"]
    assert "Another answer" in summary[-1].payload  # the answer went into the summary indeed
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a change that is used: no warning
        used = branch_run(
            db, run_id, seq_of(db, run_id, "StepStarted", 1), llm_response=answer
        ).run_id
    assert "Another answer" in SQLiteEventStore(db).read(used)[-1].payload
    assert main(["--db", str(db), "branch", run_id, "--at", str(last), "--answer", "Other."]) == 0
    shown = capsys.readouterr()
    assert shown.out.split()[0] in {r.run_id for r in SQLiteEventStore(db).runs()}
    assert shown.err.startswith("agentsm: warning: Branch ") and "no LLM call" in shown.err


class Killed(BaseException):
    """Stands for the process being killed while a tool runs."""


def test_an_idempotent_tool_run_again_after_a_crash_replays_without_the_builder(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    calls: list[str] = []

    @tool(idempotent=True)
    def fetch(key: str) -> str:
        """Read a key (safe to run twice)."""
        calls.append(key)
        return f"value of {key}"

    async def dies_once(call: ToolCall) -> ToolOutcome:
        """The process is killed while the first call runs."""
        if not calls:
            calls.append("killed")
            raise Killed(call.name)
        return await fetch_tools.aexecute(call.name, call.args)

    fetch_tools = ToolRegistry()
    fetch_tools.add(fetch)

    def make(task: str) -> AgentBuilder:
        script = [
            LlmResponse.tool_call("fetch", {"key": "a"}, id="c1"),
            LlmResponse.final_answer("The value of a is known now."),
        ]
        return (
            AgentBuilder(task)
            .llm(MockLlmCaller(script))
            .config(AgentConfig(reflect_every_n_steps=0))
            .tool(fetch)
        )

    engine = make("fetch a").store(db).tool_runner(dies_once).build()
    with pytest.raises(Killed):
        engine.run()
    resumed = make("fetch a").store(db).attach(engine.run_id)
    resumed.llm = MockLlmCaller([LlmResponse.final_answer("The value of a is known now.")])
    assert resumed.run() == "The value of a is known now."
    assert calls == ["killed", "a"]  # run again on resume: it is idempotent, no human asked
    definition = SQLiteEventStore(db).read(engine.run_id)[0]
    assert '"idempotent_tools":["fetch"]' in definition.payload.replace(" ", "")
    report = replay_run(db, engine.run_id)  # the recorded flag: the same agent, no builder
    assert report.identical, str(report)


class Reworded(ReflectingState):
    """Reflection with its own summary prompt (the library's, reworded)."""

    async def handle(self, ctx: RunContext) -> str:
        prompt = "Sum the history up in one line.\nTask: {task}\nHistory: {history_json}"
        with patch.object(reflecting, "COMPRESSION_PROMPT", prompt):
            return await super().handle(ctx)


def test_a_reworded_reflection_prompt_is_caught_under_a_changed_definition(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, reflecting_agent("find a"))
    report = replay_run(db, run_id, lambda t: reflecting_agent(t).handler("Reflecting", Reworded()))
    assert report.definition_change is not None  # the definition names the handler now
    assert report.definition_change.fields == ["custom_handlers"]
    assert report.divergence is not None  # ... and the summary request it sends differs
    assert report.divergence.seq == seq_of(db, run_id, "LlmRequested", 1)
    assert '+      "content": "Sum the history up in one line.' in report.divergence.diff
    assert '-      "content": "Summarize the following tool call history' in report.divergence.diff
    assert f"behaviour diverged at seq {report.divergence.seq}" in str(report)


def test_a_changed_prompt_and_reflection_prompt_diverge_at_the_first_request(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, reflecting_agent("find a"))

    def both(task: str) -> AgentBuilder:
        return reflecting_agent(task).system_prompt("Be exact.").handler("Reflecting", Reworded())

    report = replay_run(db, run_id, both)
    assert report.definition_change is not None
    assert report.definition_change.fields == ["custom_handlers", "system_prompt"]
    assert report.divergence is not None and not report.same_behaviour
    assert report.divergence.seq == seq_of(db, run_id, "LlmRequested")  # the first, a plan
    assert '+      "content": "Be exact."' in report.divergence.diff
    with pytest.raises(AssertionError, match="the LLM request changed: messages"):
        assert_replays(db, run_id, both)


def test_a_tool_made_idempotent_diverges_at_the_question_it_no_longer_asks(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    killed: list[str] = []

    def make(task: str, *, idempotent: bool = False) -> AgentBuilder:
        script = [
            LlmResponse.tool_call("pay", {"amount": 5}, id="p1"),
            LlmResponse.final_answer("Paid the invoice, once."),
        ]
        return (
            AgentBuilder(task)
            .llm(MockLlmCaller(script))
            .config(AgentConfig(reflect_every_n_steps=0))
            .tool(
                "pay",
                "Pay an amount.",
                {"type": "object"},
                lambda args: "paid",
                idempotent=idempotent,
            )
        )

    async def dies(call: ToolCall) -> ToolOutcome:
        killed.append(call.name)
        raise Killed(call.name)

    engine = make("pay the invoice").store(db).tool_runner(dies).build()
    with pytest.raises(Killed):
        engine.run()
    resumed = make("pay the invoice").store(db).on_approval(lambda request: True)
    assert resumed.attach(engine.run_id).run() == "Paid the invoice, once."
    asked = seq_of(db, engine.run_id, "ApprovalRequested")  # did the killed payment happen?
    assert killed == ["pay"] and replay_run(db, engine.run_id, make).identical

    report = replay_run(db, engine.run_id, lambda t: make(t, idempotent=True))
    assert report.definition_change is not None
    assert report.definition_change.fields == ["idempotent_tools"]
    divergence = report.divergence
    assert divergence is not None and divergence.seq == asked
    assert divergence.expected is not None and divergence.expected.event == "ApprovalRequested"
    assert divergence.actual is not None and divergence.actual.event == "ToolCallStarted"
    with pytest.raises(AssertionError, match=f"first divergence at seq {asked}"):
        assert_replays(db, engine.run_id, lambda t: make(t, idempotent=True))


def test_a_definition_change_that_reaches_no_request_leaves_behaviour_identical(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, agent("find a and c"))

    def looser(task: str) -> AgentBuilder:  # no request, no fact of this run sees these
        config = AgentConfig(
            reflect_every_n_steps=0, max_steps=9, tool_timeout=30.0, llm_deadline=60.0
        )
        return agent(task).config(config)

    report = replay_run(db, run_id, looser)
    assert report.definition_change is not None and report.divergence is None
    assert report.definition_change.fields == [
        "config.llm_deadline",
        "config.max_steps",
        "config.tool_timeout",
    ]
    assert report.same_behaviour and not report.identical
    assert str(report).startswith(f"run {run_id}: definition changed; behaviour identical (")
    with pytest.raises(AssertionError, match="the definition changed: config.llm_deadline"):
        assert_replays(db, run_id, looser)


def test_other_llm_settings_diverge_at_the_first_request(tmp_path: Path) -> None:
    class Tuned(MockLlmCaller):
        settings: ClassVar[dict[str, Any]] = {"temperature": 0.2}

    class Hotter(MockLlmCaller):
        settings: ClassVar[dict[str, Any]] = {"temperature": 0.9}

    db = tmp_path / "runs.db"
    run_id = record(db, agent("find a and c").llm(Tuned(list(SCRIPT))))
    assert replay_run(db, run_id, lambda t: agent(t).llm(Tuned([]))).identical
    report = replay_run(db, run_id, lambda t: agent(t).llm(Hotter([])))
    assert report.definition_change is not None and report.definition_change.fields == [
        "llm.temperature"
    ]
    assert report.divergence is not None
    assert report.divergence.seq == seq_of(db, run_id, "LlmRequested")
    assert "the LLM request changed: settings" in report.divergence.headline()
    assert '-    "temperature": 0.2' in report.divergence.diff
    assert '+    "temperature": 0.9' in report.divergence.diff
