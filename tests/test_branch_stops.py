"""Where a branch stops for want of a live effect: before it records the request, so that its
log ends where nothing is under way, and resuming it simply makes the request (no "did it take
effect?" about a call that never ran, no step counted twice)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentMemory,
    LlmResponse,
    ToolCall,
    ToolRegistry,
    tool,
)
from agentsm.hooks import ToolCallInfo
from eventstore import SQLiteEventStore
from replay import (
    BranchResult,
    branch_run,
    memory_at,
    pending_requests,
    replay_run,
    resume_run,
)

TASK = "What is the weather in Pune and Delhi?"


def calls(*cities: str) -> LlmResponse:
    """One response asking the weather of each city (several calls: one step runs them all)."""
    return LlmResponse.tool_calls(
        [ToolCall(name="weather", args={"city": c}, id=f"call_{i}") for i, c in enumerate(cities)]
    )


class Reporter:
    """A deterministic stand-in for a model: asks the weather of its cities, then answers with
    what the service said for each."""

    def __init__(self, *cities: str) -> None:
        self.cities = cities or ("Pune",)

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        if not memory.history:
            return calls(*self.cities)
        said = [e.observation.removeprefix("SUCCESS: ") for e in memory.history]
        return LlmResponse.final_answer("The service says " + "; ".join(said))


def make_agent(
    ran: list[str],
    *cities: str,
    idempotent: bool = False,
    parallel: bool = True,
    rewrite: bool = False,
) -> Callable[[str], AgentBuilder]:
    """The agent: `weather` notes each city it is run for in `ran`; `rewrite` adds a hook that
    gives each call its city in capitals (a fact recorded before the call starts)."""

    @tool(idempotent=idempotent)
    def weather(city: str) -> str:
        """Today's weather in a city."""
        ran.append(city)
        return f"{city}: 31 C"

    def capitals(info: ToolCallInfo) -> dict[str, str]:
        return {"city": str(info.call.args["city"]).upper()}

    def build(task: str) -> AgentBuilder:
        agent = (
            AgentBuilder(task)
            .config(AgentConfig(parallel_tools=parallel))
            .system_prompt("Answer with the forecast.")
            .llm(Reporter(*cities))
            .model("forecast-1")
            .tool(weather)
        )
        return agent.before_tool_call(capitals) if rewrite else agent

    return build


def parent(db: Path, build: Callable[[str], AgentBuilder]) -> tuple[str, int]:
    """A recorded run, and the seq before its first step (where a branch changes the plan)."""
    engine = build(TASK).store(db).build()
    engine.run()
    return engine.run_id, kinds(db, engine.run_id).index("StepStarted")


def kinds(db: Path, run_id: str) -> list[str]:
    with SQLiteEventStore(db) as store:
        return [e.kind for e in store.read(run_id)]


def after_branch(db: Path, run_id: str) -> list[str]:
    """The kinds of the facts a branch recorded after its RunBranched fact."""
    recorded = kinds(db, run_id)
    return recorded[recorded.index("RunBranched") + 1 :]


def sources(result: BranchResult) -> list[tuple[str, str]]:
    return [(e.kind, e.source) for e in result.effects]


def assert_nothing_under_way(db: Path, result: BranchResult) -> None:
    """The branch stopped before the call: its log ends at a transition, no call started."""
    assert result.status == "stopped"
    assert kinds(db, result.run_id)[-1] == "Transitioned"
    assert "ToolCallStarted" not in after_branch(db, result.run_id)
    memory, _ = memory_at(db, result.run_id, len(kinds(db, result.run_id)))
    assert memory.in_flight == () and memory.interrupted() == ()
    assert pending_requests(db, result.run_id) == []  # no "did it take effect?" question
    with SQLiteEventStore(db) as store:
        assert store.run(result.run_id).status == "stopped"


@pytest.mark.parametrize("idempotent", [False, True], ids=["not-idempotent", "idempotent"])
def test_a_branch_that_needs_a_live_tool_stops_before_the_call_starts(
    tmp_path: Path, idempotent: bool
) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    build = make_agent(ran, idempotent=idempotent)
    run_id, first_step = parent(db, build)
    ran.clear()

    stopped = branch_run(db, run_id, first_step, llm_response=calls("Mumbai"))
    assert sources(stopped) == [("llm", "given"), ("tool", "needed")]
    assert stopped.said(brief=True) == (
        f'needs the tool weather({{"city": "Mumbai"}}) run live at seq {stopped.needed[0].seq}'
    )
    assert_nothing_under_way(db, stopped)
    assert replay_run(db, stopped.run_id).identical
    assert ran == []  # nothing ran

    answer = resume_run(db, stopped.run_id, build)  # no "did it take effect?" asked first
    assert answer == "The service says Mumbai: 31 C"
    assert ran == ["Mumbai"]  # run once, live
    started = [
        i + 1 for i, kind in enumerate(kinds(db, stopped.run_id)) if kind == "ToolCallStarted"
    ]
    assert started == [stopped.needed[0].seq]  # started once, where the branch said
    assert "ApprovalRequested" not in after_branch(db, stopped.run_id)
    assert replay_run(db, stopped.run_id).identical


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "one-after-another"])
def test_a_step_with_a_reusable_call_and_one_that_needs_a_live_tool(
    tmp_path: Path, parallel: bool
) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    build = make_agent(ran, "Pune", "Delhi", parallel=parallel)
    run_id, first_step = parent(db, build)
    ran.clear()

    stopped = branch_run(db, run_id, first_step, llm_response=calls("Pune", "Goa"))
    assert stopped.said(brief=True).startswith('needs the tool weather({"city": "Goa"}) run live')
    if parallel:  # run together: neither starts
        assert sources(stopped) == [("llm", "given"), ("tool", "needed")]
        assert_nothing_under_way(db, stopped)
    else:  # one after another: the first is reused, the second does not start
        assert sources(stopped) == [("llm", "given"), ("tool", "reused"), ("tool", "needed")]
        assert after_branch(db, stopped.run_id)[-2:] == ["ToolCallStarted", "ToolExecuted"]
        assert pending_requests(db, stopped.run_id) == []
    assert replay_run(db, stopped.run_id).identical

    answer = resume_run(db, stopped.run_id, build)
    assert answer == "The service says Pune: 31 C; Goa: 31 C"
    assert sorted(ran) == (["Goa", "Pune"] if parallel else ["Goa"])  # the step runs live
    assert "ApprovalRequested" not in after_branch(db, stopped.run_id)
    assert replay_run(db, stopped.run_id).identical

    again = branch_run(
        db, run_id, first_step, llm_response=calls("Pune", "Goa"), builder=build, live_tools=True
    )
    assert sources(again)[1:3] == [("tool", "reused"), ("tool", "live")]  # branched with the flag
    assert replay_run(db, again.run_id).identical


def test_what_a_hook_recorded_before_the_stop_is_recorded_once(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    build = make_agent(ran, rewrite=True)
    run_id, first_step = parent(db, build)
    assert ran == ["PUNE"]

    stopped = branch_run(db, run_id, first_step, llm_response=calls("Mumbai"), builder=build)
    assert sources(stopped) == [("llm", "given"), ("tool", "needed")]
    assert stopped.needed[0].what == 'weather({"city": "MUMBAI"})'  # the call as it would run
    assert_nothing_under_way(db, stopped)
    assert "ToolCallRewritten" not in after_branch(db, stopped.run_id)  # the hook runs again

    assert resume_run(db, stopped.run_id, build) == "The service says MUMBAI: 31 C"
    assert after_branch(db, stopped.run_id).count("ToolCallRewritten") == 1
    assert replay_run(db, stopped.run_id, build).identical


def test_a_branch_that_needs_a_live_llm_stops_before_the_request_and_its_step(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    ran: list[str] = []
    build = make_agent(ran)
    run_id, first_step = parent(db, build)
    recorded, _ = memory_at(db, run_id, first_step)
    other_model = recorded.config.model_copy(update={"models": {"default": "forecast-2"}})

    stopped = branch_run(db, run_id, first_step, config=other_model)
    assert sources(stopped) == [("llm", "needed")]
    assert after_branch(db, stopped.run_id) == []  # no step begun, no request recorded
    assert pending_requests(db, stopped.run_id) == []
    with SQLiteEventStore(db) as store:
        assert store.run(stopped.run_id).status == "stopped"
    assert replay_run(db, stopped.run_id).identical

    assert resume_run(db, stopped.run_id, build) == "The service says Pune: 31 C"
    resumed = after_branch(db, stopped.run_id)
    assert resumed[:2] == ["StepStarted", "LlmRequested"]  # asked at once: no call in flight
    assert resumed.count("StepStarted") == 2  # the plan, then the answer: no step counted twice
    memory, _ = memory_at(db, stopped.run_id, len(kinds(db, stopped.run_id)))
    assert memory.step == 2
    assert stopped.needed[0].seq == kinds(db, stopped.run_id).index("LlmRequested", first_step) + 1
    assert replay_run(db, stopped.run_id).identical
