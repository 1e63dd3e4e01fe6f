"""The specification's fourteen integration tests, in Python."""

from __future__ import annotations

from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    BuildError,
    Event,
    InvalidTransition,
    LlmResponse,
    MockLlmCaller,
    State,
    ToolRegistry,
    build_transition_table,
    tool,
)
from agentsm.facts import StepStarted
from agentsm.states import ActingState, IdleState, ObservingState, PlanningState

from .conftest import Harness

ANSWER = "Paris is the capital of France, population about 2.1 million."


@tool
def search(query: str) -> str:
    """Search the web for current information."""
    return f"Results for {query!r}: Paris is the capital of France, 2.1 million people."


def calculator(args: dict[str, Any]) -> str:
    allowed = set("0123456789.+-*/() ")
    expression = str(args["expression"])
    if not set(expression) <= allowed:
        raise ValueError(f"unsupported characters in {expression!r}")
    return str(eval(expression, {"__builtins__": {}}))


CALC_SCHEMA = {
    "type": "object",
    "properties": {"expression": {"type": "string"}},
    "required": ["expression"],
}


def research_agent(llm: MockLlmCaller, **config: Any) -> AgentBuilder:
    return (
        AgentBuilder("What is the capital of France and its population?")
        .system_prompt("You are a research assistant.")
        .llm(llm)
        .config(AgentConfig(**config))
        .tool(search)
        .tool("calculator", "Evaluate arithmetic", CALC_SCHEMA, calculator)
    )


def three_step_script() -> MockLlmCaller:
    return MockLlmCaller(
        [
            LlmResponse.tool_call("search", {"query": "capital of France"}),
            LlmResponse.tool_call("calculator", {"expression": "2.1 * 1000000"}),
            LlmResponse.final_answer(ANSWER),
        ]
    )


def test_idle_to_planning_transition() -> None:
    assert Harness().handle(IdleState()) == Event.Start
    engine = research_agent(MockLlmCaller([LlmResponse.final_answer(ANSWER)])).build()
    engine.run()
    first = engine.trace().for_state("Idle")
    assert first[-1].fact.kind == "Transitioned"
    assert (first[-1].fact.from_state, first[-1].fact.to_state) == ("Idle", "Planning")


def test_planning_max_steps_guard() -> None:
    h = Harness(config=AgentConfig(max_steps=3)).given("Planning", StepStarted(step=3))
    llm = h.llm
    assert h.handle(PlanningState()) == Event.MaxSteps
    assert isinstance(llm, MockLlmCaller) and llm.call_count() == 0
    assert h.memory.error == "Reached max_steps=3 without a final answer."
    assert build_transition_table()[(State.Planning, Event.MaxSteps)] == State.Error


def test_planning_tool_blacklist() -> None:
    llm = MockLlmCaller([LlmResponse.tool_call("delete_files", {"path": "/"})])
    h = Harness(llm=llm, blacklist=("delete_files",))
    assert h.handle(PlanningState()) == Event.ToolBlacklisted
    assert h.memory.error is None
    assert h.memory.planned_calls == ()
    refusal = h.memory.rejected[0]
    assert refusal.observation.startswith("ERROR: ToolBlacklisted:")
    assert any(m.get("content") == refusal.observation for m in h.memory.build_messages())


def test_acting_unknown_tool_is_failure_not_crash() -> None:
    from agentsm.facts import ToolCallsPlanned
    from agentsm.types import ToolCall

    h = Harness().given(
        "Planning", ToolCallsPlanned(calls=(ToolCall(name="nope", args={}),), parallel=False)
    )
    assert h.handle(ActingState()) == Event.ToolFailure
    assert h.memory.last_observation is not None
    assert h.memory.last_observation.startswith("ERROR: UnknownTool: Tool 'nope' not found")


def test_observing_triggers_reflection_at_step_5() -> None:
    h = Harness().given("Planning", StepStarted(step=5))
    assert h.handle(ObservingState()) == Event.NeedsReflection
    h4 = Harness().given("Planning", StepStarted(step=4))
    assert h4.handle(ObservingState()) == Event.Continue


def test_observing_commits_to_history() -> None:
    from agentsm.facts import ToolCallsPlanned
    from agentsm.types import ToolCall

    tools = ToolRegistry()
    tools.add(search)
    call = ToolCall(name="search", args={"query": "x"})
    h = Harness(tools=tools).given(
        "Planning", StepStarted(step=1), ToolCallsPlanned(calls=(call,), parallel=False)
    )
    assert h.handle(ActingState()) == Event.ToolSuccess
    assert h.handle(ObservingState()) == Event.Continue
    assert len(h.memory.history) == 1
    entry = h.memory.history[0]
    assert (entry.step, entry.tool, entry.success) == (1, call, True)
    assert entry.observation.startswith("SUCCESS: Results for 'x'")
    assert h.memory.current_tool_call is None and h.memory.last_observation is None


def test_full_run_with_mock_llm() -> None:
    answer = research_agent(three_step_script()).build().run()
    assert answer == ANSWER


def test_full_run_reaches_done_state() -> None:
    engine = research_agent(three_step_script()).build()
    engine.run()
    assert engine.current_state() == State.Done
    assert engine.store.run(engine.run_id).status == "done"


def test_invalid_transition_returns_error() -> None:
    engine = (
        research_agent(MockLlmCaller([]))
        .handler(State.Planning, lambda ctx: Event.ReflectDone)
        .build()
    )
    with pytest.raises(InvalidTransition) as info:
        engine.run()
    assert (info.value.state, info.value.event) == (State.Planning, Event.ReflectDone)
    assert "Planning + ReflectDone" in str(info.value)
    assert engine.current_state() == State.Planning
    assert engine.store.run(engine.run_id).status == "aborted"
    assert engine.trace()[-1].event == "RunAborted"


def test_trace_records_all_steps() -> None:
    engine = research_agent(three_step_script()).build()
    engine.run()
    trace = engine.trace()
    assert len(trace) > 0
    states = [e.state for e in trace]
    assert states[0] == "Idle" and states[-1] == "Done"
    assert {"Planning", "Acting", "Observing"} <= set(states)
    assert [e.seq for e in trace] == list(range(1, len(trace) + 1))
    assert len(trace.for_state("Planning")) == 3 * 5


def test_tool_registry_execute_unknown_returns_err() -> None:
    outcome = ToolRegistry().execute("nonexistent", {})
    assert not outcome.success
    assert outcome.error_type == "UnknownTool"
    assert "nonexistent" in outcome.observation


def test_mock_llm_call_count() -> None:
    llm = three_step_script()
    research_agent(llm).build().run()
    assert llm.call_count() == 3


def test_the_mock_llm_keeps_its_last_calls_and_counts_them_all() -> None:
    llm = MockLlmCaller(
        [LlmResponse.tool_call("search", {"query": str(i)}) for i in range(4)]
        + [LlmResponse.final_answer(ANSWER)],
        keep=2,
    )
    engine = research_agent(llm, reflect_every_n_steps=0).build()
    engine.run()
    assert llm.call_count() == 5 and len(llm.calls) == 2
    assert [c.memory.step for c in llm.calls] == [4, 5]  # the last two, oldest first
    assert llm.model_for_call(4) == llm.calls[-1].model and llm.model_for_call(2) is None
    assert repr(llm) == "MockLlmCaller(served=5, remaining=0)"
    with pytest.raises(ValueError, match="keep at least the last call"):
        MockLlmCaller(keep=0)


def test_agent_config_respected() -> None:
    llm = MockLlmCaller([LlmResponse.tool_call("search", {"query": str(i)}) for i in range(5)])
    engine = research_agent(llm, max_steps=2, reflect_every_n_steps=0).build()
    with pytest.raises(AgentFailed, match="max_steps=2"):
        engine.run()
    assert llm.call_count() == 2
    assert engine.memory.step == 2
    assert engine.current_state() == State.Error


def test_builder_requires_llm() -> None:
    with pytest.raises(BuildError, match="LLM caller is required"):
        AgentBuilder("task").build()
