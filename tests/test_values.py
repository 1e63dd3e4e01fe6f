"""Deterministic helpers: a handler reads the clock, uuids and randomness through its context;
each value is recorded once (ValueDrawn) and served back by position on replay and branch."""

from __future__ import annotations

from pathlib import Path

from agentsm import AgentBuilder, Event, LlmResponse, MockLlmCaller, RunContext, tool
from agentsm import facts as f
from agentsm.states import ObservingState
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import replay_run
from replay.branching import branch_run

from .scenarios import LONG


class Stamped(ObservingState):
    """Observing that stamps each step with a time, an id and a coin toss; a low toss asks for
    reflection, so the drawn value decides the route."""

    def __init__(self, order: tuple[str, ...] = ("now", "uuid", "random")) -> None:
        self.order = order

    async def handle(self, ctx: RunContext) -> str:  # type: ignore[override]
        drawn = {source: getattr(ctx, source)() for source in self.order}
        assert isinstance(drawn["now"], float) and 0.0 <= drawn["random"] < 1.0
        assert isinstance(drawn["uuid"], str) and len(drawn["uuid"]) == 32
        event = await super().handle(ctx)
        return Event.NeedsReflection if drawn["random"] < 0.3 else event


def agent(task: str, order: tuple[str, ...] = ("now", "uuid", "random")) -> AgentBuilder:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    script = [LlmResponse.tool_call("lookup", {"key": str(i)}) for i in range(6)]
    script += [LlmResponse.final_answer(LONG)] * 4
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script))
        .tool(lookup)
        .handler("Observing", Stamped(order))
    )


def drawn(db: Path, run_id: str) -> list[f.ValueDrawn]:
    trace = Trace.load(SQLiteEventStore(db), run_id)
    return [e.fact for e in trace if isinstance(e.fact, f.ValueDrawn)]


def test_drawn_values_are_recorded_once_and_served_back_on_replay(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = agent("stamps").store(db).build()
    engine.run()
    values = drawn(db, engine.run_id)
    assert [v.source for v in values[:3]] == ["now", "uuid", "random"]
    steps = len(values) // 3  # how many steps depends on the coin tosses
    assert steps >= 1 and len(values) == 3 * steps
    assert len({v.value for v in values if v.source == "uuid"}) == steps
    report = replay_run(db, engine.run_id, agent)
    assert report.identical, str(report)


def test_a_draw_from_another_source_is_a_divergence_at_that_fact(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = agent("stamps").store(db).build()
    engine.run()
    first = next(
        e for e in Trace.load(SQLiteEventStore(db), engine.run_id) if e.event == "ValueDrawn"
    )
    report = replay_run(db, engine.run_id, lambda task: agent(task, ("uuid", "now", "random")))
    assert report.divergence is not None and report.divergence.seq == first.seq
    assert report.divergence.actual is None  # the replay stopped there


def test_a_branch_gets_the_parents_later_values(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = agent("stamps").store(db).build()
    engine.run()
    trace = Trace.load(SQLiteEventStore(db), engine.run_id)
    second_step = [e.seq for e in trace if e.event == "StepStarted"][1]
    new_id = branch_run(db, engine.run_id, at=second_step, builder=agent).run_id
    assert [v.value for v in drawn(db, new_id)] == [v.value for v in drawn(db, engine.run_id)]
    assert replay_run(db, new_id, agent).identical
