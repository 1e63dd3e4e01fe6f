"""Replay compares values as JSON holds them: 1, 1.0 and true differ, so do "1" and 1, 0 and
false, null and a missing key. An agent that now records the other value diverges at that
fact, and `assert_replays` fails for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

from agentsm import (
    AgentBuilder,
    CustomFact,
    LlmResponse,
    MockLlmCaller,
    RunContext,
    State,
    ToolCall,
    build_transition_table,
    tool,
)
from agentsm.frozen import JsonObject, same_json
from agentsm.states import PlanningState
from agentsm.transitions import TransitionTable
from eventstore import SQLiteEventStore
from replay import assert_replays, replay_run

from .scenarios import LONG

MISSING = object()
PAIRS = [
    pytest.param(1, True, id="1-true"),
    pytest.param(1, 1.0, id="1-1.0"),
    pytest.param("1", 1, id="'1'-1"),
    pytest.param(0, False, id="0-false"),
    pytest.param(None, MISSING, id="null-missing"),
]


def test_same_json_tells_apart_what_json_does() -> None:
    assert not same_json(1, True) and not same_json(1, 1.0) and not same_json(0, False)
    assert not same_json({"n": 1}, {"n": True}) and not same_json({"n": None}, {})
    assert not same_json([1, 2.0], (1, 2)) and not same_json("1", 1)
    assert same_json({"n": [1, "a", None, 1.5, True]}, {"n": (1, "a", None, 1.5, True)})
    assert same_json(State.Planning, "Planning")  # an enum is its text


class Measured(CustomFact):
    """A value a custom state measured."""

    kind: Literal["Measured"] = "Measured"
    found: JsonObject


class Measuring:
    """Between Observing and Planning: records `found` as the measure."""

    name: ClassVar[str] = "Measuring"
    emits: ClassVar[frozenset[str]] = frozenset({"Measured"})
    records: ClassVar[frozenset[Any]] = frozenset({Measured})

    def __init__(self, found: dict[str, Any]) -> None:
        self.found = found

    async def handle(self, ctx: RunContext) -> str:
        ctx.record(Measured(found=self.found))
        return "Measured"


def _measures(part: Any, fact: Measured) -> Any:
    return [*part, dict(fact.found)]


def _table() -> TransitionTable:
    rows = dict(build_transition_table())
    rows[(State.Observing, "Continue")] = "Measuring"
    rows[("Measuring", "Measured")] = State.Planning
    return TransitionTable(rows)


@tool
def echo(n: Any = None) -> str:
    """Say n back."""
    return f"n is {n!r}"


class Rewriting(PlanningState):
    """Planning that sets the planned call's `n` (or leaves it out: MISSING)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def _tool_calls(self, ctx: RunContext, response: Any) -> str:
        args = {} if self.value is MISSING else {"n": self.value}
        calls = tuple(ToolCall(name=c.name, args=args, id=c.id) for c in response.calls)
        return super()._tool_calls(ctx, response.model_copy(update={"calls": calls}))


def agent(task: str, measured: Any = 0, planned: Any = 0) -> AgentBuilder:
    found = {} if measured is MISSING else {"value": measured}
    script = [LlmResponse.tool_call("echo", {"n": 7}, id="c1"), LlmResponse.final_answer(LONG)]
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script))
        .tool(echo)
        .transitions(_table())
        .handler("Measuring", Measuring(found))
        .handler("Planning", Rewriting(planned))
        .fact(Measured, _measures, part="measures", initial=[])
    )


def record(db: Path, **values: Any) -> str:
    engine = agent("measure", **values).store(db).build()
    assert engine.run() == LONG
    return engine.run_id


def seq_of(db: Path, run_id: str, kind: str) -> int:
    return next(e.seq for e in SQLiteEventStore(db).read(run_id) if e.kind == kind)


@pytest.mark.parametrize(("recorded", "now"), PAIRS)
def test_a_custom_fact_holding_the_other_value_diverges_there(
    tmp_path: Path, recorded: Any, now: Any
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, measured=recorded)
    assert_replays(db, run_id, lambda t: agent(t, measured=recorded))
    report = replay_run(db, run_id, lambda t: agent(t, measured=now))
    assert report.definition_change is None and report.divergence is not None
    assert report.divergence.seq == seq_of(db, run_id, "Measured")
    assert report.divergence.fields == ["found.value"]
    with pytest.raises(AssertionError, match="first divergence at seq"):
        assert_replays(db, run_id, lambda t: agent(t, measured=now))


@pytest.mark.parametrize(("recorded", "now"), PAIRS)
def test_llm_call_arguments_planned_as_the_other_value_diverge_at_the_plan(
    tmp_path: Path, recorded: Any, now: Any
) -> None:
    db = tmp_path / "runs.db"
    run_id = record(db, planned=recorded)
    assert_replays(db, run_id, lambda t: agent(t, planned=recorded))
    report = replay_run(db, run_id, lambda t: agent(t, planned=now))
    assert report.definition_change is None and report.divergence is not None
    assert report.divergence.seq == seq_of(db, run_id, "ToolCallsPlanned")
    assert report.divergence.fields == ["calls"]
    with pytest.raises(AssertionError, match="first divergence at seq"):
        assert_replays(db, run_id, lambda t: agent(t, planned=now))
