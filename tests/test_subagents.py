"""Sub-agents: a tool that runs another agent as a child run in the parent's store, linked to
the parent's call; its answer observed, its failure as data, a shared budget, resume after a
kill mid-child, replay (served, or with the children), and the family in listings and pictures.
On real SQLite files and PostgreSQL (the `backend` fixture), and SQLite in memory where a test
needs only one store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentFailed,
    BuildError,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    ParentCall,
    SubAgentTool,
    TokenBudget,
    TokenUsage,
)
from agentsm import facts as f
from agentsm.pictures import family_of
from agentsm.subagent import children_of, subagent_of
from agentsm.trace import Trace
from eventstore import EventStore, SQLiteEventStore
from replay import branch_run, decide, pending_requests, replay_run, resume_run
from replay.cli import main
from replay.ui.views import lineage_of

from .backends import Backend
from .subagent_agent import CHILD_PROMPT, ChildLlm, ParentLlm, make_agent, researcher

ROOT = Path(__file__).resolve().parent.parent


def facts_of(store: EventStore, run_id: str, kind: type[Any]) -> list[Any]:
    return [x for x in Trace.load(store, run_id).facts() if isinstance(x, kind)]


def run_parent(store: EventStore, builder: AgentBuilder, run_id: str = "p1") -> str:
    return builder.store(store).run_id(run_id).build().run()


def test_the_child_is_a_run_of_the_same_store_linked_to_the_parents_call(
    backend: Backend,
) -> None:
    store = backend.open()
    answer = run_parent(store, make_agent("What is the capital of France?"))

    child_id = "p1-1-0"  # the parent run, the planning step and the call's position
    child = store.run(child_id)
    started = facts_of(store, "p1", f.ToolCallStarted)[0]
    start_seq = next(
        e.seq for e in Trace.load(store, "p1").entries() if isinstance(e.fact, f.ToolCallStarted)
    )
    assert (child.parent_id, child.branch_seq, child.status) == ("p1", start_seq, "done")
    assert subagent_of(child) == "researcher" and subagent_of(store.run("p1")) is None
    assert child.task == "What is the capital of France? (part 1)" == started.call.args["task"]
    definition = facts_of(store, child_id, f.RunStarted)[0]
    assert definition.parent_call == ParentCall(
        run_id="p1", seq=start_seq, step=1, position=0, tool="researcher"
    )
    assert definition.system_prompt == CHILD_PROMPT
    assert [t.name for t in definition.tools] == ["note"]
    assert definition.config.max_steps == 4 and definition.config.models["default"] == "child-model"
    child_answer = "You found the answer to What is the capital of France? (part 1)"
    assert facts_of(store, child_id, f.FinalAnswerProduced)[0].content == child_answer
    executed = facts_of(store, "p1", f.ToolExecuted)[0]
    assert executed.observation == f"SUCCESS: {child_answer}" and executed.usage is None
    assert answer == f"The researcher reported: SUCCESS: {child_answer}"
    assert [r.run_id for r in children_of(store, ["p1"])] == [child_id]
    assert "sub-agent of p1@" in Trace.load(store, child_id).format(width=None)


def test_child_ids_come_from_the_calls_place_never_from_the_llms_call_id() -> None:
    store = SQLiteEventStore(":memory:")
    parent = make_agent("Two questions").llm(ParentLlm(calls=2))  # both calls are id "c1"
    answer = run_parent(store, parent)
    assert sorted(r.run_id for r in children_of(store, ["p1"])) == ["p1-1-0", "p1-1-1"]
    assert answer.count("SUCCESS: You found the answer") == 2
    links = [facts_of(store, c, f.RunStarted)[0].parent_call for c in ("p1-1-0", "p1-1-1")]
    assert [(x.step, x.position) for x in links if x is not None] == [(1, 0), (1, 1)]


def test_a_child_may_have_sub_agents_of_its_own(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "runs.db")
    middle = (  # a template builder (its task is replaced) that delegates in turn
        AgentBuilder("template")
        .llm(ParentLlm())
        .subagent("researcher", "Delegate further.", researcher)
    )
    parent = make_agent("Three levels").subagent("manager", "Manages.", middle)
    parent.llm(
        MockLlmCaller(
            [
                LlmResponse.tool_call("manager", {"task": "organise"}),
                lambda memory, tools, model: LlmResponse.final_answer(
                    f"Done: {memory.history[-1].observation}"
                ),
            ]
        )
    )
    answer = run_parent(store, parent)
    grandchild = store.run("p1-1-0-1-0")
    assert (grandchild.parent_id, subagent_of(grandchild)) == ("p1-1-0", "researcher")
    assert "You found the answer to organise (part 1)" in answer
    assert [(r.run_id, d) for r, d in family_of(store, "p1-1-0-1-0")] == [
        ("p1", 0),
        ("p1-1-0", 1),
        ("p1-1-0-1-0", 2),
    ]
    report = replay_run(store, "p1", lambda task: parent, children=True)
    assert report.identical, str(report)
    assert [g.run_id for c in report.children for g in c.children] == ["p1-1-0-1-0"]


def test_a_failed_child_is_a_failed_observation_and_the_parent_goes_on(
    backend: Backend,
) -> None:
    store = backend.open()
    looping = MockLlmCaller([LlmResponse.tool_call("note", {"text": "again"})] * 3)
    parent = make_agent("Loop forever").subagent(
        "looper", "Never finishes.", researcher("template", llm=looping).max_steps(2)
    )
    parent.llm(
        MockLlmCaller(
            [
                LlmResponse.tool_call("looper", {"task": "spin"}),
                lambda memory, tools, model: LlmResponse.final_answer(
                    f"Gave up: {memory.history[-1].observation}"
                ),
            ]
        )
    )
    answer = run_parent(store, parent)
    executed = facts_of(store, "p1", f.ToolExecuted)[0]
    assert not executed.success and executed.error_type == "SubAgentFailed"
    assert executed.observation.startswith("ERROR: SubAgentFailed: sub-agent run p1-1-0 failed:")
    assert "max_steps=2" in executed.observation and answer.startswith("Gave up: ERROR:")
    assert store.run("p1-1-0").status == "failed" and store.run("p1").status == "done"


def test_a_child_llm_error_and_a_bad_child_are_data_too() -> None:
    store = SQLiteEventStore(":memory:")
    broken = researcher("x", llm=MockLlmCaller([RuntimeError("provider down")]))
    parent = (
        AgentBuilder("Ask twice")
        .llm(
            MockLlmCaller(
                [
                    LlmResponse.tool_call("broken", {"task": "a"}),
                    LlmResponse.tool_call("bad", {"task": "b"}),
                    LlmResponse.tool_call("broken", {"task": ""}),
                    LlmResponse.tool_call("mute", {"task": "c"}),
                    LlmResponse.final_answer("Nothing worked, as the log shows."),
                ]
            )
        )
        .subagent("broken", "Its LLM fails.", broken)
        .subagent("bad", "Not an agent.", lambda task: "not a builder")  # type: ignore[arg-type,return-value]
        .subagent("mute", "No LLM.", lambda task: AgentBuilder(task))
    )
    run_parent(store, parent)
    first, second, third, fourth = facts_of(store, "p1", f.ToolExecuted)
    assert first.error_type == "SubAgentFailed" and "provider down" in first.observation
    assert second.error_type == "BuildError" and "not an AgentBuilder" in second.observation
    assert third.error_type == "InvalidArguments"
    assert fourth.error_type == "BuildError"
    assert "The child of sub-agent 'mute' has no LLM; give the builder" in fourth.observation
    assert [r.run_id for r in children_of(store, ["p1"])] == ["p1-1-0"]


def test_a_sub_agent_needs_a_child_with_an_llm() -> None:
    with pytest.raises(BuildError, match="the child's builder has no LLM"):
        AgentBuilder("t").subagent("helper", "Helps.", AgentBuilder("child"))
    with pytest.raises(BuildError, match="AgentBuilder or a function"):
        AgentBuilder("t").subagent("helper", "Helps.", 42)  # type: ignore[arg-type]
    made = AgentBuilder("t").subagent("helper", "Helps.", researcher, share_budget=True)
    assert repr(made.tools.get("helper")) == "<SubAgentTool 'helper' share_budget>"
    assert isinstance(made.tools.get("helper"), SubAgentTool)
    assert made.tools.get("helper").schema["required"] == ["task"]  # type: ignore[union-attr]


def test_a_sub_agent_outside_a_run_or_on_a_taken_id_is_refused_as_data() -> None:
    made = AgentBuilder("t").subagent("helper", "Helps.", researcher, timeout=300)
    helper = made.tools.get("helper")
    assert helper is not None and helper.timeout == 300 and helper.idempotent
    outcome = made.tools.execute("helper", {"task": "x"})
    assert outcome.error_type == "SubAgentUnavailable" and "only as a call" in outcome.observation

    store = SQLiteEventStore(":memory:")
    AgentBuilder("squatter").system_prompt("Squatter.").llm(ChildLlm()).tool(note_tool()).store(
        store
    ).run_id("p1-1-0").build().run()
    answer = run_parent(store, make_agent("Taken"))
    assert "ERROR: SubAgentUnavailable: run p1-1-0 exists already" in answer
    assert children_of(store, ["p1"]) == []


def note_tool() -> Any:
    from .subagent_agent import note

    return note


def test_a_shared_budget_spent_by_the_child_stops_the_parent(backend: Backend) -> None:
    store = backend.open()
    usage = TokenUsage(input_tokens=25, output_tokens=25)
    spend = LlmResponse.tool_call("note", {"text": "more"}, usage=usage)  # 50 tokens a step
    parent = (
        AgentBuilder("Spend it all")
        .llm(ParentLlm(usage=10))
        .budget(TokenBudget(max_total_tokens=100))
        .subagent(
            "researcher",
            "Spends.",
            lambda task: researcher(task, llm=MockLlmCaller([spend] * 3)),
            share_budget=True,
        )
    )
    with pytest.raises(AgentFailed, match="Token budget exhausted"):
        run_parent(store, parent)
    child = facts_of(store, "p1-1-0", f.RunStarted)[0]
    assert child.budget == TokenBudget(max_total_tokens=90)  # what the parent had left
    assert facts_of(store, "p1-1-0", f.RunFailed)[0].reason == "budget"  # 100 of its 90
    executed = facts_of(store, "p1", f.ToolExecuted)[0]
    assert executed.usage == TokenUsage(input_tokens=50, output_tokens=50)
    assert executed.error_type == "SubAgentFailed"
    failed = facts_of(store, "p1", f.RunFailed)
    assert [x.reason for x in failed] == ["budget"]  # the parent's normal budget stop
    assert store.run("p1").summary.tokens == 110  # its own 10 and the child's 100
    assert replay_run(store, "p1", children=True).identical  # the usage is served back


def test_without_sharing_the_childs_tokens_stay_its_own() -> None:
    store = SQLiteEventStore(":memory:")
    parent = make_agent("Keep apart").budget(TokenBudget(max_total_tokens=25))
    run_parent(store, parent)
    assert facts_of(store, "p1", f.ToolExecuted)[0].usage is None
    assert facts_of(store, "p1-1-0", f.RunStarted)[0].budget is None
    assert store.run("p1").summary.tokens == 20 and store.run("p1-1-0").summary.tokens == 40


class Refusing:
    """An LLM that must not be asked: replay serves the child's answer from the parent's log."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        raise AssertionError("the child ran during the parent's replay")


def test_replay_serves_the_childs_recorded_answer_without_running_it(backend: Backend) -> None:
    store = backend.open()
    run_parent(store, make_agent("Replay me").budget(TokenBudget(max_total_tokens=500)))
    before = [r.run_id for r in store.runs()]

    def offline(task: str) -> AgentBuilder:
        return (
            AgentBuilder(task)
            .system_prompt("You delegate research.")
            .llm(ParentLlm())
            .budget(TokenBudget(max_total_tokens=500))
            .subagent(
                "researcher", "Delegate one research question.", researcher(task, llm=Refusing())
            )
        )

    report = replay_run(store, "p1", offline)
    assert report.identical, str(report)
    assert report.children == () and replay_run(store, "p1").identical  # no builder: recorded
    assert [r.run_id for r in store.runs()] == before


def test_replay_with_children_replays_each_child_against_its_recording(backend: Backend) -> None:
    store = backend.open()
    run_parent(store, make_agent("Family").llm(ParentLlm(calls=2)))
    report = replay_run(store, "p1", make_agent, children=True)
    assert report.identical, str(report)
    assert [c.run_id for c in report.children] == ["p1-1-0", "p1-1-1"]
    assert all(c.identical and c.compared > 5 for c in report.children)
    assert "sub-agent run p1-1-1: identical" in str(report)
    assert replay_run(store, "p1", children=True).identical  # the recorded definitions
    assert replay_run(store, "p1-1-1", make_agent).identical  # a child with its parent's builder


def test_a_changed_child_prompt_diverges_in_the_childs_replay(backend: Backend) -> None:
    store = backend.open()
    run_parent(store, make_agent("Change the child"))

    other = _with_child_prompt("Researchers answer in one word.")
    report = replay_run(store, "p1", other, children=True)
    assert report.divergence is None and report.definition_change is None  # the parent: same
    assert not report.identical
    (child,) = report.children
    assert child.run_id == "p1-1-0" and not child.identical
    change = child.definition_change
    assert change is not None and change.seq == 1 and change.fields == ["system_prompt"]
    divergence = child.divergence  # its first LLM request asks with the other prompt
    assert divergence is not None and divergence.seq == 4
    assert '+      "content": "Researchers answer in one word."' in divergence.diff
    text = str(report)
    assert "sub-agent run p1-1-0: definition changed; behaviour diverged at seq 4" in text
    assert "system_prompt" in text
    assert replay_run(store, "p1", other).identical  # the parent alone serves the answer


def _with_child_prompt(prompt: str) -> Callable[[str], AgentBuilder]:
    def make(task: str) -> AgentBuilder:
        return (
            AgentBuilder(task)
            .system_prompt("You delegate research.")
            .llm(ParentLlm())
            .subagent(
                "researcher",
                "Delegate one research question.",
                lambda t: researcher(t, prompt=prompt),
            )
        )

    return make


def killed_mid_child(backend: Backend, kill: str = "1") -> EventStore:
    """Run the parent in a process that dies in the child's second LLM call (or, with
    kill="note", in the child's tool)."""
    if not backend.shared:
        pytest.skip("a killed process's SQLite in memory is gone with it")
    script = (
        "import sys; from tests.subagent_agent import make_agent; "
        "make_agent('Survive a kill').store(sys.argv[1]).run_id('p1').build().run()"
    )
    env = {**os.environ, "AGENTSM_TEST_KILL": kill}
    done = subprocess.run(
        [sys.executable, "-c", script, backend.url], cwd=ROOT, env=env, capture_output=True
    )
    assert done.returncode == 9, done.stderr.decode()
    store = backend.open()
    assert store.run("p1-1-0").status == "running" and store.run("p1").status == "running"
    ran = 0 if kill == "note" else 1
    assert len(facts_of(store, "p1-1-0", f.ToolExecuted)) == ran  # its tool ran before the kill
    return store


def test_resume_after_a_kill_mid_child_continues_the_same_child(backend: Backend) -> None:
    store = killed_mid_child(backend)

    answer = resume_run(store, "p1", make_agent)

    assert answer.startswith("The researcher reported: SUCCESS: You found the answer")
    assert [r.run_id for r in children_of(store, ["p1"])] == ["p1-1-0"]  # no second child
    child = Trace.load(store, "p1-1-0").facts()
    assert sum(isinstance(x, f.RunStarted) for x in child) == 1
    assert sum(isinstance(x, f.ToolExecuted) for x in child) == 1  # not run again
    assert sum(isinstance(x, f.LlmRequested) for x in child) == 3  # the killed call asked again
    assert len(facts_of(store, "p1", f.ToolCallStarted)) == 2  # the call, then its re-run
    assert len(facts_of(store, "p1", f.ToolExecuted)) == 1
    assert store.run("p1-1-0").status == "done" and store.run("p1").status == "done"
    assert replay_run(store, "p1", make_agent, children=True).identical


def test_a_kill_in_a_childs_tool_replays_identical_through_both_waits(backend: Backend) -> None:
    store = killed_mid_child(backend, kill="note")  # the child's tool may not run again

    with pytest.raises(HumanInputRequired):  # the child asks whether it took effect
        resume_run(store, "p1", make_agent)
    assert len(facts_of(store, "p1", f.ToolCallStarted)) == 2  # the call, then its re-run
    assert facts_of(store, "p1", f.ApprovalRequested)[-1].reason == "outcome_unknown"
    report = replay_run(store, "p1", make_agent, children=True)  # the stop, the re-run, the wait
    assert report.identical, str(report)

    decide(store, "p1-1-0", "approved")
    decide(store, "p1", "approved")
    assert resume_run(store, "p1", make_agent).startswith("The researcher reported: SUCCESS")
    report = replay_run(store, "p1", make_agent, children=True)
    assert report.identical, str(report)


def test_the_child_resumed_on_its_own_with_the_parents_builder_runs_as_the_child(
    backend: Backend,
) -> None:
    store = killed_mid_child(backend)
    child_answer = resume_run(store, "p1-1-0", make_agent)  # as a worker would: parent's builder
    assert child_answer == "You found the answer to Survive a kill (part 1)"
    assert facts_of(store, "p1-1-0", f.LlmRequested)[-1].model == "child-model"
    answer = resume_run(store, "p1", make_agent)  # the call observes the finished child
    assert answer == f"The researcher reported: SUCCESS: {child_answer}"
    assert len(facts_of(store, "p1-1-0", f.LlmRequested)) == 3  # not run again by the parent
    assert replay_run(store, "p1", make_agent, children=True).identical


def test_a_branch_of_a_child_with_the_parents_builder_is_a_branch_of_the_child_agent() -> None:
    store = SQLiteEventStore(":memory:")
    run_parent(store, make_agent("Branch the child"))
    new_id = branch_run(
        store, "p1-1-0", 2, llm=ChildLlm(), builder=make_agent, new_run_id="cb"
    ).run_id
    branch = store.run(new_id)
    assert (branch.parent_id, subagent_of(branch)) == ("p1-1-0", None)  # a branch, not a child
    assert facts_of(store, "cb", f.LlmRequested)[-1].model == "child-model"
    assert branch.summary.answer == "You found the answer to Branch the child (part 1)"
    assert [r.run_id for r in children_of(store, ["p1"])] == ["p1-1-0"]


def test_agentsm_branch_live_of_a_child_with_the_parents_builder_asks_the_childs_llm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteEventStore(db)
    run_parent(store, make_agent("Branch the child live"))
    store.close()
    builder = f"{ROOT / 'tests' / 'subagent_agent.py'}:make_agent"
    args = ["--db", str(db), "branch", "p1-1-0", "--at", "2", "--live", "--builder", builder]
    assert main(args) == 0
    new_id = capsys.readouterr().out.split()[0]
    store = SQLiteEventStore(db)
    assert facts_of(store, new_id, f.LlmRequested)[-1].model == "child-model"
    answer = store.run(new_id).summary.answer
    assert answer == "You found the answer to Branch the child live (part 1)"  # not the parent's


def test_best_of_a_child_with_the_parents_builder_asks_the_childs_llm_for_a_model() -> None:
    from replay import Variant, best_of

    store = SQLiteEventStore(":memory:")
    run_parent(store, make_agent("Judge the child"))
    result = best_of(store, "p1-1-0", 2, [Variant(model="big")], lambda c: 0, builder=make_agent)
    [candidate] = result.candidates
    assert candidate.answer == "You found the answer to Judge the child (part 1)"
    assert facts_of(store, candidate.run_id, f.LlmRequested)[-1].model == "big"


def test_a_child_waiting_for_a_human_leaves_the_parents_call_waiting(backend: Backend) -> None:
    store = backend.open()

    def careful(task: str) -> AgentBuilder:
        return researcher(task).require_approval("note")

    parent = make_agent("Ask first").subagent("careful", "Asks a human.", careful)
    parent.llm(
        MockLlmCaller(
            [
                LlmResponse.tool_call("careful", {"task": "note it"}, id="c1"),
                lambda memory, tools, model: LlmResponse.final_answer(
                    f"Careful said: {memory.history[-1].observation}"
                ),
            ]
        )
    )
    with pytest.raises(HumanInputRequired) as waiting:
        run_parent(store, parent)
    assert [r.call.name for r in waiting.value.requests] == ["careful"]
    reason = waiting.value.requests[0].reason  # says why, and what to decide first
    assert "sub-agent run p1-1-0 has not finished (status waiting)" in reason
    assert "decide it first (agentsm approve p1-1-0), then approve this call" in reason
    assert store.run("p1-1-0").status == "waiting" and store.run("p1").status == "waiting"
    assert facts_of(store, "p1", f.ToolExecuted) == []  # the call's outcome is unknown

    decide(store, "p1-1-0", "approved")  # the child's question first
    [asked] = pending_requests(store, "p1")
    assert "(status ready): approve this call to continue it" in asked.reason
    decide(store, "p1", "approved")  # then: continue the call

    def again(task: str) -> AgentBuilder:
        return (
            make_agent(task)
            .subagent("careful", "Asks a human.", careful)
            .llm(
                MockLlmCaller(
                    [
                        lambda memory, tools, model: LlmResponse.final_answer(
                            f"Careful said: {memory.history[-1].observation}"
                        )
                    ]
                )
            )
        )

    answer = resume_run(store, "p1", again)
    assert answer == "Careful said: SUCCESS: You found the answer to note it"
    assert [r.run_id for r in children_of(store, ["p1"])] == ["p1-1-0"]
    assert replay_run(store, "p1").identical  # the wait replays as it happened


def test_runs_tree_family_picture_and_viewer_show_the_child(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    store = SQLiteEventStore(db)
    run_parent(store, make_agent("A family"))
    branch = branch_run(store, "p1", 2, llm=ParentLlm(), builder=make_agent, new_run_id="b1").run_id
    store.close()

    assert main(["--db", str(db), "runs", "--tree"]) == 0
    tree = capsys.readouterr().out.splitlines()
    rows = [line for line in tree if line.split() and line.split()[0] in ("p1", "↳", "└")]
    assert rows[0].startswith("p1 ")
    assert any("↳ p1-1-0" in r and "p1@" in r and "sub-agent researcher" in r for r in rows)
    assert any(f"└ {branch}" in r and "sub-agent" not in r for r in rows)
    child_row = next(i for i, r in enumerate(tree) if "↳ p1-1-0" in r)
    assert tree.index(rows[0]) < child_row

    assert main(["--db", str(db), "runs", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"subagent": "researcher"' in out

    assert main(["--db", str(db), "show", "p1-1-0"]) == 0
    assert "sub-agent run (researcher) of p1" in capsys.readouterr().out

    assert main(["--db", str(db), "replay", "p1", "--children"]) == 0
    out = capsys.readouterr().out
    assert "p1  identical" in out and "└ sub-agent p1-1-0  identical" in out

    store = SQLiteEventStore(db)
    family = family_of(store, "p1-1-0")  # from any member: the whole family from its root
    assert [(r.run_id, d) for r, d in family][0] == ("p1", 0)
    assert {(r.run_id, d) for r, d in family} >= {("p1-1-0", 1), (branch, 1)}
    lineage = {r["run_id"]: r for r in lineage_of(store, "p1")}
    assert lineage["p1-1-0"]["subagent"] == "researcher" and lineage["p1-1-0"]["changes"] == []
    assert lineage[branch]["subagent"] is None and lineage[branch]["changes"]


def test_the_picture_of_a_child_with_the_parents_builder_is_the_childs_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fastapi.testclient import TestClient

    from replay.ui import Viewer, create_app

    from .together_agent import make_agent as checking_parent

    db = tmp_path / "runs.db"
    run_parent(SQLiteEventStore(db), checking_parent("Draw the child"))
    builder = "tests.together_agent:make_agent"
    assert main(["--db", str(db), "graph", "p1-1-0", "--builder", builder]) == 0
    drawn = capsys.readouterr().out
    assert "Observing --> Checking: Continue" in drawn  # the child's own rows
    assert "Observing --> Planning: Continue" not in drawn  # not the parent's
    viewer = Viewer(str(db), builder=checking_parent)
    client = TestClient(create_app(viewer), base_url="http://127.0.0.1")  # type: ignore[arg-type]
    response = client.get("/api/runs/p1-1-0/diagram")
    assert response.status_code == 200
    assert "Checking" in response.text  # the child's own table
    assert "Observing --> Planning" not in json.dumps(response.json())


def test_the_family_picture_marks_the_sub_agent_edge(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from agentsm.pictures import family_tree

    store = SQLiteEventStore(tmp_path / "runs.db")
    run_parent(store, make_agent("Picture it"))
    figure = family_tree(store, "p1")
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert any(t.startswith("sub-agent researcher, call at seq") for t in texts)
    assert any("p1-1-0" in t for t in texts)
