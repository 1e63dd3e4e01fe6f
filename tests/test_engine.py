"""The engine end to end: outcomes of varied runs, the log they leave, and structural errors."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentFailed,
    AgentMemory,
    ApprovalNeeded,
    Event,
    FinalAnswer,
    HandlerCrashed,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    OwnershipViolation,
    RunContext,
    SafetyCapExceeded,
    State,
    ToolFinished,
    ToolStarted,
    TransitionTaken,
    build_transition_table,
    fold,
)
from agentsm import facts as f
from agentsm.trace import Trace
from eventstore import SQLiteEventStore

from .scenarios import LONG, SCENARIOS, approvals, base, reflection


def finish(builder: AgentBuilder, store: Any = None) -> Any:
    engine = (builder.store(store) if store is not None else builder).build()
    try:
        engine.run()
    except AgentFailed:
        pass
    return engine


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fold_of_the_log_equals_the_engine_memory(name: str) -> None:
    engine = SCENARIOS[name]().build()
    live: list[AgentMemory] = []
    engine.observe(lambda seq, state, fact, memory: live.append(memory))
    try:
        engine.run()
    except AgentFailed:
        pass
    memory, state = AgentMemory.rebuild(engine.store, engine.run_id)
    assert memory == engine.memory
    assert state == engine.current_state()
    facts = engine.trace().facts()
    assert len(facts) == len(live) == engine.seq
    for i in range(1, len(facts) + 1):  # the memory the engine had right after every fact
        assert fold(facts[:i]) == live[i - 1], f"seq {i}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_rebuild_in_a_fresh_process_from_the_file(name: str, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = finish(SCENARIOS[name](), db)
    script = (
        "import json, sys\n"
        "from agentsm import AgentMemory\n"
        "from eventstore import SQLiteEventStore\n"
        "m, s = AgentMemory.rebuild(SQLiteEventStore(sys.argv[1], create=False), sys.argv[2])\n"
        "print(json.dumps({'memory': m.model_dump(mode='json'), 'state': str(s)}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(db), engine.run_id],
        capture_output=True,
        text=True,
        check=True,
    )
    rebuilt = json.loads(out.stdout)
    assert rebuilt["state"] == engine.current_state()
    assert AgentMemory.model_validate(rebuilt["memory"]) == engine.memory


def test_outcomes_of_the_scenarios() -> None:
    outcomes = {}
    for name, make in SCENARIOS.items():
        engine = finish(make())
        outcomes[name] = (engine.current_state(), engine.memory.error)
    assert outcomes["parallel"] == (State.Done, None)
    assert outcomes["approvals"] == (State.Done, None)
    assert outcomes["reflection"] == (State.Done, None)
    assert outcomes["blacklist"] == (State.Done, None)
    assert outcomes["failures"] == (
        State.Error,
        "LLM call failed: ConnectionError: provider went away",
    )
    assert outcomes["budget"][0] == State.Error and "budget" in (outcomes["budget"][1] or "")
    assert outcomes["max_steps"] == (State.Error, "Reached max_steps=3 without a final answer.")


def test_parallel_run_history_and_messages() -> None:
    engine = finish(SCENARIOS["parallel"]())
    history = engine.memory.history
    assert [e.tool.name for e in history] == ["lookup", "fetch", "explode"]
    assert [e.success for e in history] == [True, True, False]
    assert history[1].observation == 'SUCCESS: {"url": "u", "status": 200}'
    assert history[2].observation == "ERROR: RuntimeError: nope"
    messages = engine.memory.build_messages()
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert len(assistant) == 1 and len(assistant[0]["tool_calls"]) == 3
    assert assistant[0]["content"] == "Checking three things."
    assert engine.memory.total_usage.total_tokens == 15 + 18


def test_approvals_run_records_each_decision() -> None:
    engine = finish(approvals())
    history = engine.memory.history
    assert [(e.tool.name, e.tool.args, e.success) for e in history] == [
        ("transfer", {"amount": 1, "to": "ann"}, True),
        ("transfer", {"amount": 5, "to": "bob"}, True),
        ("transfer", {"amount": 9, "to": "eve"}, False),
        ("lookup", {"key": "k"}, True),
        ("transfer", {"amount": 2, "to": "zed"}, False),
    ]
    events = [e.fact.event for e in engine.trace() if isinstance(e.fact, f.Transitioned)]
    assert Event.HumanModified in events and Event.HumanApprovedBatch in events
    assert Event.HumanRejected in events


def test_reflection_run_compresses_and_resets_retries() -> None:
    engine = finish(reflection())
    kinds = [e.event for e in engine.trace()]
    assert kinds.count("HistoryCompressed") == 3
    assert engine.memory.history[0].is_summary
    assert engine.memory.retry_count == 0


def test_failure_observations_reach_the_llm() -> None:
    engine = finish(SCENARIOS["failures"]())
    observations = [e.observation for e in engine.memory.history]
    assert observations[0] == "ERROR: RuntimeError: disk full"
    assert observations[1].startswith("ERROR: UnknownTool: Tool 'no_such_tool' not found")
    assert observations[2].startswith("ERROR: InvalidArguments:")


def test_mock_script_running_out_ends_in_error_not_exception() -> None:
    engine = base("t", [LlmResponse.tool_call("lookup", {"key": "a"})]).build()
    with pytest.raises(AgentFailed) as info:
        engine.run()
    assert "no more programmed responses" in info.value.error
    assert engine.current_state() == State.Error
    assert engine.store.run(engine.run_id).status == "failed"


def test_at_most_max_steps_planning_calls() -> None:
    engine = finish(SCENARIOS["max_steps"]())
    assert isinstance(engine.llm, MockLlmCaller) and engine.llm.call_count() == 3
    assert engine.memory.step == 3


def test_stream_yields_transitions_tools_and_the_answer() -> None:
    engine = SCENARIOS["parallel"]().build()

    async def collect() -> list[Any]:
        return [out async for out in engine.stream()]

    outputs = asyncio.run(collect())
    kinds = [type(o).__name__ for o in outputs]
    assert kinds[0] == "TransitionTaken"
    assert kinds.count("ToolStarted") == 3 and kinds.count("ToolFinished") == 3
    assert isinstance(outputs[-1], FinalAnswer) and outputs[-1].content == LONG
    first_finish = kinds.index("ToolFinished")
    assert all(isinstance(o, ToolStarted) for o in outputs[first_finish - 3 : first_finish])
    assert isinstance(outputs[first_finish], ToolFinished)
    transitions = [o for o in outputs if isinstance(o, TransitionTaken)]
    assert (transitions[-1].from_state, transitions[-1].to_state) == ("Planning", "Done")


def test_arun_and_run_inside_a_running_loop() -> None:
    async def main() -> tuple[str, str]:
        inside = SCENARIOS["blacklist"]().build().run()  # sync run while a loop runs (Jupyter)
        awaited = await SCENARIOS["blacklist"]().build().arun()
        return inside, awaited

    assert asyncio.run(main()) == (LONG, LONG)


def test_run_again_after_the_end_returns_the_same_answer() -> None:
    engine = SCENARIOS["blacklist"]().build()
    assert engine.run() == LONG
    n = len(engine.trace())
    assert engine.run() == LONG
    assert len(engine.trace()) == n


def test_waiting_for_a_human_without_callback_stops_durably(tmp_path: Path) -> None:
    engine = (
        base("pay", [LlmResponse.tool_call("transfer", {"amount": 3, "to": "ann"})])
        .require_approval("transfer")
        .store(tmp_path / "runs.db")
        .build()
    )
    with pytest.raises(HumanInputRequired) as info:
        engine.run()
    assert info.value.requests[0].call.args == {"amount": 3, "to": "ann"}
    assert engine.current_state() == State.WaitingForHuman
    assert engine.store.run(engine.run_id).status == "waiting"
    memory, state = AgentMemory.rebuild(SQLiteEventStore(tmp_path / "runs.db"), engine.run_id)
    assert state == State.WaitingForHuman and memory == engine.memory

    async def stream() -> list[Any]:
        again = (
            base("pay", [LlmResponse.tool_call("transfer", {"amount": 3, "to": "ann"})])
            .require_approval("transfer")
            .build()
        )
        return [o async for o in again.stream()]

    assert isinstance(asyncio.run(stream())[-1], ApprovalNeeded)


def test_safety_cap_stops_a_looping_custom_table() -> None:
    table = build_transition_table().with_rows({("Planning", "Spin"): "Planning"})
    engine = base("loop", []).transitions(table).handler("Planning", lambda ctx: "Spin").build()
    with pytest.raises(SafetyCapExceeded, match="Safety cap exceeded"):
        engine.run()
    cap = engine.memory.config.effective_safety_cap()
    transitions = [e for e in engine.trace() if e.event == "Transitioned"]
    assert len(transitions) == cap
    assert engine.store.run(engine.run_id).status == "aborted"


def test_handler_that_raises_is_reported_and_recorded() -> None:
    def broken(ctx: RunContext) -> str:
        raise KeyError("missing")

    engine = base("t", []).handler("Planning", broken).build()
    with pytest.raises(HandlerCrashed, match="Planning raised KeyError"):
        engine.run()
    last = engine.trace()[-1]
    assert last.event == "RunAborted" and "KeyError" in last.data


def test_recording_a_fact_the_state_does_not_own_is_refused() -> None:
    def sneaky(ctx: RunContext) -> str:
        ctx.record(f.FinalAnswerProduced(content="forged"))
        return Event.ToolSuccess

    engine = (
        base("t", [LlmResponse.tool_call("lookup", {"key": "a"})]).handler("Acting", sneaky).build()
    )
    with pytest.raises(OwnershipViolation, match="only Planning may record"):
        engine.run()
    assert engine.memory.final_answer is None


def test_custom_table_with_a_verifying_state() -> None:
    table = (
        build_transition_table()
        .without_rows(("Observing", "Continue"))
        .with_rows({("Observing", "Continue"): "Verifying", ("Verifying", "Verified"): "Planning"})
    )
    visits: list[int] = []

    def verify(ctx: RunContext) -> str:
        visits.append(ctx.memory.step)
        return "Verified"

    engine = (
        base(
            "verify",
            [LlmResponse.tool_call("lookup", {"key": "a"}), LlmResponse.final_answer(LONG)],
        )
        .transitions(table)
        .handler("Verifying", verify)
        .build()
    )
    assert engine.run() == LONG
    assert visits == [1]
    memory, state = AgentMemory.rebuild(engine.store, engine.run_id)
    assert state == State.Done and memory == engine.memory


def test_log_does_not_repeat_the_conversation() -> None:
    steps = 200
    script = [LlmResponse.tool_call("lookup", {"key": str(i)}) for i in range(steps)]
    engine = finish(
        base(
            "long",
            script + [LlmResponse.final_answer(LONG)],
            max_steps=steps + 1,
            reflect_every_n_steps=0,
        )
    )
    store = engine.store
    sizes = {e.seq: len(e.payload) for e in store.read(engine.run_id)}
    requests = [e for e in Trace.load(store, engine.run_id) if e.event == "LlmRequested"]
    early, late = sizes[requests[5].seq], sizes[requests[-1].seq]
    assert late == early  # the request fact does not grow with the history
    assert len(engine.memory.history) == steps


@pytest.mark.parametrize("state", ["Planning", "Checking"])
def test_a_handler_may_not_record_the_engines_facts(state: str) -> None:
    def forger(ctx: RunContext) -> str:
        ctx.record(f.Transitioned(from_state=state, event="Forged", to_state="Done"))
        return "Checked"

    table = build_transition_table().with_rows(
        {("Idle", "Start"): state, ("Checking", "Checked"): "Planning"}
    )
    agent = base("t", []).transitions(table).handler(state, forger)
    engine = agent.handler("Checking", forger).build()
    with pytest.raises(OwnershipViolation, match="only the engine records"):
        engine.run()
    transitions = [x for x in engine.trace().facts() if isinstance(x, f.Transitioned)]
    assert [t.event for t in transitions] == ["Start"]
    assert engine.trace()[-1].event == "RunAborted"


def test_the_safety_cap_is_checked_before_a_handlers_effects() -> None:
    effects: list[int] = []

    def spin(ctx: RunContext) -> str:
        effects.append(ctx.memory.step)  # stands for an LLM call or a tool run
        return "Spin"

    table = build_transition_table().with_rows(
        {("Idle", "Start"): "Spin", ("Spin", "Spin"): "Spin"}
    )
    engine = base("loop", []).transitions(table).handler("Spin", spin).build()
    with pytest.raises(SafetyCapExceeded):
        engine.run()
    facts = engine.trace().facts()
    from_spin = [x for x in facts if isinstance(x, f.Transitioned) and x.from_state == "Spin"]
    assert len(effects) == len(from_spin)  # every handler call led to its transition
