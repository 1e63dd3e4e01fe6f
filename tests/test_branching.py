"""One branch model for every kind of change: a recorded LLM response or tool result is reused
only where the branch makes the same request at the same place; elsewhere the branch goes live
where allowed, or stops there and says what it would need (`replay.branching`,
`replay.branchsources`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agentsm import AgentBuilder, AgentMemory, LlmResponse, ToolRegistry, tool
from agentsm import facts as f
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import BranchResult, ReplayError, branch_run, memory_at, replay_run, resume_run
from replay.cli import main

TASK = "What is the weather in Pune?"


class Forecaster:
    """A deterministic stand-in for a model that reads what it was told: asks the weather
    service for the task's city, then answers with what the service said."""

    def __init__(self, city: str = "Pune") -> None:
        self.city = city
        self.calls = 0

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        self.calls += 1
        if not memory.history:
            return LlmResponse.tool_call("weather", {"city": self.city})
        said = memory.history[-1].observation.removeprefix("SUCCESS: ")
        return LlmResponse.final_answer(f"In {self.city} it is {said}, as the service says.")


def make_agent(down: bool = False) -> Callable[[str], AgentBuilder]:
    @tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return "the weather service is down" if down else f"{city}: 31 C and humid"

    def build(task: str) -> AgentBuilder:
        return (
            AgentBuilder(task)
            .system_prompt("Answer with the forecast.")
            .llm(Forecaster())
            .model("forecast-1")
            .tool(weather)
        )

    return build


def parent(db: Path) -> str:
    """A recorded run whose weather service was down: its answer says so."""
    engine = make_agent(down=True)(TASK).store(db).build()
    answer = engine.run()
    assert "down" in answer
    return engine.run_id


def seqs(db: Path, run_id: str, kind: str) -> list[int]:
    with SQLiteEventStore(db) as store:
        return [e.seq for e in store.read(run_id) if e.kind == kind]


def kinds(db: Path, run_id: str) -> list[str]:
    with SQLiteEventStore(db) as store:
        return [e.kind for e in store.read(run_id)]


def sources(result: BranchResult) -> list[tuple[str, str]]:
    return [(e.kind, e.source) for e in result.effects]


# -- another tool result ----------------------------------------------------------------------


def test_another_tool_result_without_a_live_llm_stops_where_the_llm_would_see_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    before_tool = seqs(db, run_id, "ToolCallStarted")[0] - 1
    branch = branch_run(db, run_id, before_tool, tool_result="Pune: 30 C")
    assert sources(branch) == [("tool", "given"), ("llm", "needed")]
    needed = branch.needed[0]
    assert needed.seq > len(kinds(db, branch.run_id))  # the seq its request will have
    assert needed.why == "its messages differ from the parent's"
    assert branch.status == "stopped" and branch.answer is None  # not the parent's answer
    assert branch.said() == (
        f"needs a live LLM at seq {needed.seq} ({needed.why}): pass llm= (your LLM)"
    )
    assert kinds(db, branch.run_id)[-1] == "Transitioned"  # stopped before asking: no request
    with SQLiteEventStore(db) as store:
        assert store.run(branch.run_id).status == "stopped"
    assert "NotRecorded" not in str(branch) and not branch.moved
    assert replay_run(db, branch.run_id).identical  # a stopped branch replays to its stop
    assert resume_run(db, branch.run_id, make_agent()) == (  # resumed with the agent: live
        "In Pune it is Pune: 30 C, as the service says."
    )
    assert needed.seq == seqs(db, branch.run_id, "LlmRequested")[-1]  # asked where it said


def test_another_tool_result_with_a_live_llm_gets_an_answer_that_saw_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    before_tool = seqs(db, run_id, "ToolCallStarted")[0] - 1
    branch = branch_run(db, run_id, before_tool, tool_result="Pune: 30 C", llm=Forecaster())
    assert branch.answer == "In Pune it is Pune: 30 C, as the service says."
    assert sources(branch) == [("tool", "given"), ("llm", "live")]
    assert replay_run(db, branch.run_id).identical


# -- another LLM response ---------------------------------------------------------------------


def test_another_llm_response_reuses_nothing_that_saw_other_inputs(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    first_step = seqs(db, run_id, "StepStarted")[0] - 1
    other_city = LlmResponse.tool_call("weather", {"city": "Mumbai"})

    stopped = branch_run(db, run_id, first_step, llm_response=other_city)
    assert sources(stopped) == [("llm", "given"), ("tool", "needed")]
    tool_stop = stopped.needed[0]
    assert tool_stop.what == 'weather({"city": "Mumbai"})'
    assert tool_stop.why == 'the parent ran weather({"city": "Pune"}) there'
    assert stopped.said() == (
        f'needs the tool weather({{"city": "Mumbai"}}) run live at seq {tool_stop.seq} '
        '(the parent ran weather({"city": "Pune"}) there): pass live_tools=True and builder='
    )
    assert "ToolExecuted" not in kinds(db, stopped.run_id)

    tools_only = branch_run(
        db, run_id, first_step, llm_response=other_city, builder=make_agent(), live_tools=True
    )
    assert sources(tools_only) == [("llm", "given"), ("tool", "live"), ("llm", "needed")]
    assert tools_only.status == "stopped"

    ran: list[str] = []
    live = branch_run(
        db,
        run_id,
        first_step,
        llm_response=other_city,
        llm=Forecaster("Mumbai"),
        builder=make_agent(),
        live_tools=True,
        on_live_tool=lambda call: ran.append(call.name),
    )
    assert live.answer == "In Mumbai it is Mumbai: 31 C and humid, as the service says."
    assert sources(live) == [("llm", "given"), ("tool", "live"), ("llm", "live")]
    assert ran == ["weather"] and replay_run(db, live.run_id).identical


def test_the_same_call_at_the_same_place_reuses_the_recorded_result(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    first_step = seqs(db, run_id, "StepStarted")[0] - 1
    same_call = LlmResponse.tool_call("weather", {"city": "Pune"}, id="other-id")
    branch = branch_run(db, run_id, first_step, llm_response=same_call, llm=Forecaster())
    tool_run = branch.effects[1]
    started = seqs(db, run_id, "ToolCallStarted")[0]
    assert (tool_run.source, tool_run.parent_seq) == ("reused", started)
    assert branch.answer is not None and "down" in branch.answer  # the recorded result, reused


# -- another config ---------------------------------------------------------------------------


def test_a_config_that_leaves_the_requests_alike_reuses_every_recorded_effect(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    recorded, _ = memory_at(db, run_id, 2)
    more_steps = recorded.config.model_copy(update={"max_steps": 4})
    branch = branch_run(db, run_id, 2, config=more_steps)
    asked = seqs(db, run_id, "LlmRequested")
    assert sources(branch) == [("llm", "reused"), ("tool", "reused"), ("llm", "reused")]
    assert [e.parent_seq for e in branch.effects] == [
        asked[0],
        seqs(db, run_id, "ToolCallStarted")[0],
        asked[1],
    ]
    assert re.fullmatch(
        rf"reused  seq \d+  LLM call \(plan\) \(the parent's call at seq {asked[0]}\)",
        branch.lines()[1],
    )
    with SQLiteEventStore(db) as store:
        assert branch.answer == store.run(run_id).summary.answer and branch.status == "done"


def test_a_config_that_changes_the_request_goes_live_only_when_allowed(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    recorded, _ = memory_at(db, run_id, 2)
    other_model = recorded.config.model_copy(update={"models": {"default": "forecast-2"}})
    stopped = branch_run(db, run_id, 2, config=other_model)
    assert sources(stopped) == [("llm", "needed")]
    assert stopped.needed[0].why == "model 'forecast-2', where the parent asked 'forecast-1'"
    live = branch_run(db, run_id, 2, config=other_model, llm=Forecaster())
    assert sources(live) == [("llm", "live"), ("tool", "reused"), ("llm", "live")]
    assert live.status == "done"


def test_live_tools_need_the_builder(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    with pytest.raises(ReplayError, match="pass builder="):
        branch_run(db, run_id, 2, tool_result="x", live_tools=True)


def test_a_moved_branch_point_says_so(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    inside = seqs(db, run_id, "LlmRequested")[0]
    branch = branch_run(db, run_id, inside, llm_response=LlmResponse.final_answer("x" * 30))
    assert branch.moved and branch.at == inside and branch.point < inside
    assert str(branch).splitlines()[1] == (
        f"from {run_id} at seq {branch.point} (seq {inside} asked for: a branch starts after a "
        f"complete transition, and seq {branch.point} is the last one at or before it)"
    )
    assert repr(branch).endswith("given=1, reused=0, live=0, needed=0)")


# -- the demo, from the command line ----------------------------------------------------------


def test_the_demos_branch_with_another_answer_stops_saying_why_or_goes_live(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "demo.db")
    assert main(["demo", "--db", db]) == 0
    capsys.readouterr()
    with SQLiteEventStore(db) as store:
        run_id = next(r.run_id for r in store.runs() if r.parent_id is None)
    code = main(["--db", db, "branch", run_id, "--at", "13", "--answer", "Paris."])
    out, err = capsys.readouterr()
    assert code == 2
    lines = out.splitlines()
    assert re.fullmatch(r"  stopped \(state Planning\): needs a live LLM at seq \d+", lines[1])
    assert "seq 13 asked for" in lines[2] and "seq 12 is the last one" in lines[2]
    assert lines[-1].startswith("  needed  ") and lines[-1].endswith("pass --live and --builder")
    assert "was refused" in err  # "Paris." is too short: the LLM would be told so
    with SQLiteEventStore(db) as store:
        facts = Trace.load(store, lines[0]).facts()
    assert not any(isinstance(x, f.ToolExecuted) and "NotRecorded" in x.observation for x in facts)
    assert not any(isinstance(x, f.FinalAnswerProduced) for x in facts)  # no borrowed answer

    live = ["--live", "--live-tools", "--builder", "replay.demo:demo_agent"]
    code = main(["--db", db, "branch", run_id, "--at", "13", "--answer", "Paris.", *live])
    out, _ = capsys.readouterr()
    effects = [line.split()[0] for line in out.splitlines()[3:]]
    assert code == 0 and out.splitlines()[1].startswith("  done (state Done): ")
    assert effects[0] == "given" and set(effects[1:]) == {"live"}


def test_a_result_a_branch_set_stays_set_in_a_branch_that_reuses_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = parent(db)
    before_tool = seqs(db, run_id, "ToolCallStarted")[0] - 1
    given = branch_run(db, run_id, before_tool, tool_result="Pune: 30 C", llm=Forecaster())
    recorded, _ = memory_at(db, given.run_id, 2)
    more_steps = recorded.config.model_copy(update={"max_steps": 4})
    again = branch_run(db, given.run_id, 2, config=more_steps)  # reuses the result given
    assert sources(again) == [("llm", "reused"), ("tool", "reused"), ("llm", "reused")]
    assert again.answer == given.answer
    report = replay_run(db, again.run_id, make_agent(), execute_tools=True)
    assert report.identical  # the tool is not run for a result a branch set
