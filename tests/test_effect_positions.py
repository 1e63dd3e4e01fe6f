"""Recorded effects are found by their place in the run, never by the id an LLM gave a call:
providers reuse ids across responses and even within one. Each test records a real run in SQLite
and replays, resumes or branches it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentMemory,
    HumanInputRequired,
    LlmResponse,
    State,
    ToolCall,
    ToolOutcome,
    tool,
)
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import replay_run
from replay.branching import branch_run
from replay.recording import Recording
from replay.resuming import decide, pending_requests, resume_run

from .scenarios import LONG


class ProcessDied(BaseException):
    """Stands for the process being killed while an effect runs."""


def numbered(*responses: list[tuple[str, dict[str, Any]]] | str) -> Callable[..., Any]:
    """An LLM that numbers its calls call_0, call_1, ... in every response, as some
    OpenAI-compatible servers do; a str item is a final answer."""
    script = list(responses)

    class Numbering:
        served = 0

        async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
            item = script[Numbering.served]
            Numbering.served += 1
            if isinstance(item, str):
                return LlmResponse.final_answer(item)
            calls = [ToolCall(name=n, args=a, id=f"call_{i}") for i, (n, a) in enumerate(item)]
            return LlmResponse.tool_calls(calls)

    return Numbering


class ByStep:
    """An LLM whose n-th answer is for the n-th step that reached history: a fresh process
    resuming a run gets the same answers."""

    def __init__(self, *responses: LlmResponse) -> None:
        self.responses = responses

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        return self.responses[len({e.step for e in memory.history})]


def agent(llm: Any, task: str = "positions", **config: Any) -> AgentBuilder:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    @tool
    def transfer(amount: int, to: str) -> str:
        """Move money."""
        return f"sent {amount} to {to}"

    return AgentBuilder(task).llm(llm).config(AgentConfig(**config)).tool(lookup).tool(transfer)


def observations(db: Path, run_id: str) -> list[str]:
    memory, _ = AgentMemory.rebuild(SQLiteEventStore(db), run_id)
    return [e.observation for e in memory.history]


def test_ids_numbered_from_zero_in_every_response_replay_identical(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    llm = numbered(
        [("lookup", {"key": "a"})],
        [("lookup", {"key": "b"}), ("lookup", {"key": "c"})],
        [("lookup", {"key": "d"})],
        LONG,
    )
    engine = agent(llm()).store(db).build()
    assert engine.run() == LONG
    assert observations(db, engine.run_id) == [f"SUCCESS: value of {k}" for k in "abcd"]
    report = replay_run(db, engine.run_id)
    assert report.identical, str(report)


@pytest.mark.parametrize("parallel", [True, False])
def test_two_calls_with_one_id_in_a_response_keep_both_results(
    tmp_path: Path, parallel: bool
) -> None:
    db = tmp_path / "runs.db"
    same_id = [
        ToolCall(name="lookup", args={"key": "first"}, id="dup"),
        ToolCall(name="lookup", args={"key": "second"}, id="dup"),
        ToolCall(name="lookup", args={"key": "first"}, id="dup"),
    ]
    script = [LlmResponse.tool_calls(same_id), LlmResponse.final_answer(LONG)]
    from agentsm import MockLlmCaller

    engine = agent(MockLlmCaller(script), parallel_tools=parallel).store(db).build()
    engine.run()
    expected = ["SUCCESS: value of first", "SUCCESS: value of second", "SUCCESS: value of first"]
    assert observations(db, engine.run_id) == expected
    report = replay_run(db, engine.run_id)
    assert report.identical, str(report)


def waiting_agent(answers: list[Any] | None = None, **config: Any) -> Callable[[str], Any]:
    """Two transfers in one response, both needing approval; `answers` feed the callback."""

    def make(task: str) -> AgentBuilder:
        calls = [
            ToolCall(name="transfer", args={"amount": 1, "to": "ann"}, id="A"),
            ToolCall(name="transfer", args={"amount": 2, "to": "bob"}, id="B"),
        ]
        builder = agent(
            ByStep(LlmResponse.tool_calls(calls), LlmResponse.final_answer(LONG)),
            task,
            **config,
        ).require_approval("transfer")
        if answers is not None:
            pending = list(answers)
            builder.on_approval(lambda request: pending.pop(0) if pending else None)
        return builder

    return make


def test_two_decisions_given_one_call_at_a_time_replay_identical(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    make = waiting_agent()
    with pytest.raises(HumanInputRequired):
        make("t").store(db).run_id("r").build().run()
    decide(db, "r", "approved", call_id="A")
    assert [r.call.id for r in pending_requests(db, "r")] == ["B"]
    decide(db, "r", "rejected", call_id="B")
    assert resume_run(db, "r", make) == LONG
    assert observations(db, "r") == [
        "SUCCESS: sent 1 to ann",
        "ERROR: HumanRejected: a human rejected the call to 'transfer'.",
    ]
    report = replay_run(db, "r", make)
    assert report.identical, str(report)


def test_a_callback_that_decides_one_call_and_not_the_next_keeps_its_decision(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    make = waiting_agent(answers=[False])
    with pytest.raises(HumanInputRequired) as waiting:
        make("t").store(db).run_id("r").build().run()
    assert [r.call.id for r in waiting.value.requests] == ["B"]
    memory, state = AgentMemory.rebuild(SQLiteEventStore(db), "r")
    assert state == State.WaitingForHuman and memory.pending_approval == ("B",)
    assert [d.call_id for d in memory.decisions] == ["A"]
    decide(db, "r", "approved")
    assert resume_run(db, "r", waiting_agent(answers=[])) == LONG
    assert replay_run(db, "r", make).identical


def test_approve_then_crash_then_did_it_take_effect_replays_both_verdicts(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    runs = {"n": 0}

    def make(task: str) -> AgentBuilder:
        @tool(name="transfer")
        async def dying_transfer(amount: int, to: str) -> str:
            """Move money; the first run dies halfway."""
            runs["n"] += 1
            if runs["n"] == 1:
                raise ProcessDied()
            return f"sent {amount} to {to}"

        script = ByStep(
            LlmResponse.tool_call("transfer", {"amount": 5, "to": "cy"}, id="call_0"),
            LlmResponse.final_answer(LONG),
        )
        return AgentBuilder(task).llm(script).tool(dying_transfer).require_approval("transfer")

    with pytest.raises(HumanInputRequired):
        make("t").store(db).run_id("r").build().run()
    decide(db, "r", "approved", note="go")
    with pytest.raises(ProcessDied):
        resume_run(db, "r", make)
    with pytest.raises(HumanInputRequired):
        resume_run(db, "r", make)  # the process stopped in transfer: did it take effect?
    decide(db, "r", "rejected", note="it did")
    assert resume_run(db, "r", make) == LONG
    assert observations(db, "r")[0].startswith("ERROR: OutcomeUnknown:")
    verdicts = [e.fact for e in Trace.load(SQLiteEventStore(db), "r") if e.event == "HumanDecided"]
    assert [d.verdict for v in verdicts for d in v.decisions] == ["approved", "rejected"]
    report = replay_run(db, "r", make)
    assert report.identical, str(report)


def test_execute_tools_reproduces_a_crash_inside_a_tool(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    runs = {"n": 0}

    def make(task: str) -> AgentBuilder:
        @tool(name="lookup", idempotent=True)
        async def dying_lookup(key: str) -> str:
            """Look a key up; the first run dies halfway."""
            runs["n"] += 1
            if runs["n"] == 1:
                raise ProcessDied()
            return f"value of {key}"

        script = ByStep(
            LlmResponse.tool_call("lookup", {"key": "k"}, id="k1"), LlmResponse.final_answer(LONG)
        )
        return AgentBuilder(task).llm(script).tool(dying_lookup)

    with pytest.raises(ProcessDied):
        make("t").store(db).run_id("r").build().run()
    assert resume_run(db, "r", make) == LONG  # an idempotent tool simply runs again
    started = Trace.load(SQLiteEventStore(db), "r").for_state("Acting")
    assert [e.event for e in started].count("ToolCallStarted") == 2
    assert replay_run(db, "r", make).identical
    report = replay_run(db, "r", make, execute_tools=True)
    assert report.identical, str(report)


def test_a_branch_reusing_an_id_with_new_arguments_runs_the_tool(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    llm = numbered([("lookup", {"key": "a"})], [("lookup", {"key": "b"})], LONG)
    parent = agent(llm()).store(db).build()
    parent.run()
    trace = Trace.load(SQLiteEventStore(db), parent.run_id)
    second_step = [e.seq for e in trace if e.event == "StepStarted"][1]
    branch = branch_run(
        db,
        parent.run_id,
        at=second_step - 1,
        llm_response=LlmResponse.tool_call("lookup", {"key": "z"}, id="call_0"),
        builder=lambda task: agent(llm(), task),
        live_tools=True,
    )
    new_id = branch.run_id
    assert observations(db, new_id) == ["SUCCESS: value of a", "SUCCESS: value of z"]
    assert [(e.source, e.what) for e in branch.effects if e.kind == "tool"] == [
        ("live", 'lookup({"key": "z"})')
    ]
    assert branch.status == "stopped" and branch.needed[0].kind == "llm"  # it saw z, not b
    assert replay_run(db, new_id).identical


def test_a_branch_after_a_crash_in_an_llm_call_continues_with_the_next_response(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    calls = {"n": 0}

    class DiesOnce:
        async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
            calls["n"] += 1
            if calls["n"] == 2:
                raise ProcessDied()
            step = len(memory.history)
            if step < 2:
                return LlmResponse.tool_call("lookup", {"key": "ab"[step]}, id="call_0")
            return LlmResponse.final_answer(LONG)

    make = lambda task: agent(DiesOnce(), task)  # noqa: E731
    with pytest.raises(ProcessDied):
        make("t").store(db).run_id("r").build().run()
    assert resume_run(db, "r", make) == LONG
    trace = Trace.load(SQLiteEventStore(db), "r")
    planned_b = [e.seq for e in trace if e.event == "ToolCallsPlanned"][1]
    new_id = branch_run(db, "r", at=planned_b + 1, config=AgentConfig(max_steps=9)).run_id
    memory, state = AgentMemory.rebuild(SQLiteEventStore(db), new_id)
    assert state == State.Done and memory.final_answer == LONG
    assert [e.tool.args for e in memory.history] == [{"key": "a"}, {"key": "b"}]
    assert replay_run(db, "r", make).identical
    assert replay_run(db, new_id).identical


def test_a_branch_with_another_tool_result_replays_when_tools_run_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    llm = numbered([("lookup", {"key": "a"})], LONG)
    parent = agent(llm()).store(db).build()
    parent.run()
    trace = Trace.load(SQLiteEventStore(db), parent.run_id)
    before_tool = next(e.seq for e in trace if e.event == "ToolCallStarted") - 1
    new_id = branch_run(db, parent.run_id, at=before_tool, tool_result="value of a: 42").run_id
    assert observations(db, new_id) == ["SUCCESS: value of a: 42"]
    branched = next(
        e.fact for e in Trace.load(SQLiteEventStore(db), new_id) if e.event == "RunBranched"
    )
    assert branched.tool_result == "SUCCESS: value of a: 42"
    report = replay_run(db, new_id, lambda task: agent(llm(), task), execute_tools=True)
    assert report.identical, str(report)


def test_a_served_effect_about_another_call_is_a_divergence() -> None:
    from replay.effects import RecordedDecisions, RecordedTools, ReplayDiverged
    from replay.recording import DecisionEffect, ToolEffect

    recorded = ToolCall(name="lookup", args={"key": "a"}, id="call_0")
    tools = RecordedTools([ToolEffect(3, recorded, ToolOutcome.ok("value of a"))], strict=True)
    import asyncio

    with pytest.raises(ReplayDiverged, match=r"lookup\(\{'key': 'b'\}\)"):
        asyncio.run(tools(ToolCall(name="lookup", args={"key": "b"}, id="call_0")))
    from agentsm import ApprovalRequest
    from agentsm import facts as f

    decision = f.Decision(call_id="call_0", verdict="approved", index=1)
    decisions = RecordedDecisions([[DecisionEffect(5, decision, 1, recorded)]], strict=True)
    assert decisions(ApprovalRequest(run_id="r", step=1, call=recorded, index=0)) is None
    assert decisions.paused  # position 0 was not decided in this group: the run waits there
    other = ToolCall(name="lookup", args={"key": "b"}, id="call_0")
    with pytest.raises(ReplayDiverged, match="position 1"):
        decisions(ApprovalRequest(run_id="r", step=1, call=other, index=1))


# -- naming the waiting call -----------------------------------------------------------------


def two_waiting(db: Path, first: str, second: str) -> None:
    calls = [
        ToolCall(name="transfer", args={"amount": 1, "to": "ann"}, id=first),
        ToolCall(name="transfer", args={"amount": 2, "to": "bob"}, id=second),
    ]
    from agentsm import MockLlmCaller

    builder = agent(MockLlmCaller([LlmResponse.tool_calls(calls)])).require_approval("transfer")
    with pytest.raises(HumanInputRequired):
        builder.store(db).run_id("r").build().run()


def test_a_call_id_matches_exactly_before_it_matches_as_a_prefix(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    two_waiting(db, "c1", "c12")
    decided = decide(db, "r", "approved", call_id="c1")
    assert [d.call_id for d in decided] == ["c1"]
    assert [r.call.id for r in pending_requests(db, "r")] == ["c12"]


def test_an_ambiguous_call_decides_nothing_and_names_the_candidates(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    two_waiting(db, "c17", "c12")
    before = SQLiteEventStore(db).read("r")
    with pytest.raises(ValueError, match=r"#1 c17 \(transfer\), #2 c12 \(transfer\)"):
        decide(db, "r", "approved", call_id="c1")
    with pytest.raises(ValueError, match="no waiting call 'x'"):
        decide(db, "r", "approved", call_id="x")
    assert SQLiteEventStore(db).read("r") == before


def test_replacement_arguments_that_break_the_schema_decide_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    two_waiting(db, "c1", "c2")
    before = SQLiteEventStore(db).read("r")
    with pytest.raises(ValueError, match=r"args\.to is required.*replaces all of the call's"):
        decide(db, "r", "modified", call_id="c1", args={"amount": 9})
    with pytest.raises(ValueError, match=r"args\.amount should be integer"):
        decide(db, "r", "modified", call_id="c1", args={"amount": "nine", "to": "ann"})
    assert SQLiteEventStore(db).read("r") == before
    decide(db, "r", "modified", call_id="c1", args={"amount": 9, "to": "cy"})
    assert [r.call.id for r in pending_requests(db, "r")] == ["c2"]


def test_calls_sharing_an_id_are_decided_by_position(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    two_waiting(db, "call_0", "call_0")
    with pytest.raises(ValueError, match="names 2 waiting calls"):
        decide(db, "r", "rejected", call_id="call_0")
    decided = decide(db, "r", "rejected", call_id="#2")
    assert [(d.call_id, d.index) for d in decided] == [("call_0", 1)]
    [left] = pending_requests(db, "r")
    assert left.call.args == {"amount": 1, "to": "ann"} and left.index == 0


def test_a_batch_where_one_call_was_abandoned_replays_identical(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    def make(task: str) -> AgentBuilder:
        @tool(timeout=0.05)
        async def pay(amount: int) -> str:
            """Pay; it hangs past its timeout."""
            await asyncio.sleep(30)
            return "paid"

        calls = [
            ToolCall(name="lookup", args={"key": "a"}, id="call_0"),
            ToolCall(name="pay", args={"amount": 5}, id="call_0"),
            ToolCall(name="lookup", args={"key": "b"}, id="call_0"),
        ]
        llm = ByStep(LlmResponse.tool_calls(calls), LlmResponse.final_answer(LONG))
        return agent(llm, task).tool(pay)

    with pytest.raises(HumanInputRequired):
        make("t").store(db).run_id("r").build().run()
    decide(db, "r", "rejected", note="it did not")
    assert resume_run(db, "r", make) == LONG
    assert [o.split(":")[0:2] for o in observations(db, "r")] == [
        ["SUCCESS", " value of a"],
        ["ERROR", " OutcomeUnknown"],
        ["SUCCESS", " value of b"],
    ]
    for execute in (False, True):
        report = replay_run(db, "r", make, execute_tools=execute)
        assert report.identical, str(report)


def test_two_identical_calls_abandoned_in_one_batch_replay_identical(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    def make(task: str) -> AgentBuilder:
        @tool(timeout=0.05)
        async def pay(amount: int) -> str:
            """Pay; it hangs past its timeout."""
            await asyncio.sleep(30)
            return "paid"

        twice = [ToolCall(name="pay", args={"amount": 5}, id="call_0")] * 2
        llm = ByStep(LlmResponse.tool_calls(twice), LlmResponse.final_answer(LONG))
        return agent(llm, task).tool(pay)

    with pytest.raises(HumanInputRequired):
        make("t").store(db).run_id("r").build().run()
    report = replay_run(db, "r", make)  # both starts were asked about, neither was a stop
    assert report.identical, str(report)
    assert [
        e.outcome is not None for e in Recording.load(SQLiteEventStore(db), "r").tool_effects
    ] == [
        True,
        True,
    ]
    decide(db, "r", "rejected", note="it did not")
    assert resume_run(db, "r", make) == LONG
    for execute in (False, True):
        report = replay_run(db, "r", make, execute_tools=execute)
        assert report.identical, str(report)


# -- decisions taken out of the LLM's order ---------------------------------------------------


def three_transfers(task: str) -> AgentBuilder:
    """Three transfers in one response, each needing approval, ids numbered from zero."""
    calls = [
        ToolCall(name="transfer", args={"amount": n, "to": to}, id=f"call_{n}")
        for n, to in enumerate(["ann", "bob", "cy"])
    ]
    llm = ByStep(LlmResponse.tool_calls(calls), LlmResponse.final_answer(LONG))
    return agent(llm, task).require_approval("transfer")


@pytest.mark.parametrize(
    "steps",
    [
        [("approved", "#2", None), ("approved", None, None)],
        [
            ("approved", "#2", None),
            ("rejected", "#1", None),
            ("modified", None, {"amount": 9, "to": "cy"}),
        ],
        [("rejected", "#3", None), ("approved", "#1", None), ("approved", None, None)],
    ],
    ids=["2-then-rest", "2-1-modify", "3-1-rest"],
)
def test_calls_decided_out_of_order_replay_identical(
    tmp_path: Path, steps: list[tuple[Any, str | None, dict[str, Any] | None]]
) -> None:
    db = tmp_path / "runs.db"
    with pytest.raises(HumanInputRequired):
        three_transfers("t").store(db).run_id("r").build().run()
    for verdict, call, args in steps:
        decide(db, "r", verdict, call_id=call, args=args)
    assert resume_run(db, "r", three_transfers) == LONG
    groups = [
        [d.index for d in e.fact.decisions]
        for e in Trace.load(SQLiteEventStore(db), "r")
        if e.event == "HumanDecided"
    ]
    assert len(groups) == len(steps) and groups[0] != [0]
    report = replay_run(db, "r", three_transfers)
    assert report.identical, str(report)


def test_a_callback_that_passes_on_a_call_is_still_asked_about_the_next(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    answers: list[Any] = [None, True, None]
    builder = three_transfers("t").on_approval(lambda request: answers.pop(0))
    with pytest.raises(HumanInputRequired) as waiting:
        builder.store(db).run_id("r").build().run()
    assert [r.index for r in waiting.value.requests] == [0, 2]
    decide(db, "r", "approved")
    assert resume_run(db, "r", three_transfers) == LONG
    assert replay_run(db, "r", three_transfers).identical
