"""Replay, time travel, branch and diff, driven through the `replay` API on real SQLite logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    AgentMemory,
    Event,
    LlmResponse,
    RunContext,
    State,
    tool,
)
from agentsm.states import PlanningState
from agentsm.trace import Trace
from eventstore import AmbiguousRunId, SQLiteEventStore, UnknownRun
from replay import assert_replays, replay_run
from replay.branching import branch_run
from replay.diffing import diff_runs
from replay.report import first_divergence
from replay.source import resolve_run
from replay.timetravel import memory_at

from .scenarios import LONG, SCENARIOS, base, parallel


def record(make: Any, db: Path) -> str:
    engine = make().store(db).build()
    try:
        engine.run()
    except AgentFailed:
        pass
    return engine.run_id


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_unchanged_agent_replays_identical(name: str, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(SCENARIOS[name], db)
    before = SQLiteEventStore(db).read(run_id)
    report = replay_run(db, run_id, lambda task: SCENARIOS[name]())
    assert report.identical, str(report)
    assert report.compared == len(before)
    assert replay_run(db, run_id).identical  # against the recorded definition alone
    assert SQLiteEventStore(db).read(run_id) == before  # the recorded run is only read
    assert len(SQLiteEventStore(db).runs()) == 1


def test_a_changed_prompt_word_is_caught_at_seq_1_and_at_its_first_request(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(parallel, db)

    def reworded(task: str) -> AgentBuilder:
        return parallel().system_prompt("You are very careful.")

    report = replay_run(db, run_id, reworded)
    change = report.definition_change
    assert not report.identical and change is not None and change.seq == 1
    assert change.fields == ["system_prompt"]
    assert '-    "system_prompt": "You are careful.",' in change.diff
    assert '+    "system_prompt": "You are very careful.",' in change.diff
    first_request = next(
        e.seq for e in SQLiteEventStore(db).read(run_id) if e.kind == "LlmRequested"
    )
    divergence = report.divergence  # the LLM was asked something else: behaviour changed there
    assert divergence is not None and divergence.seq == first_request
    assert not report.same_behaviour and divergence.fields == ["messages_digest"]
    assert '-      "content": "You are careful."' in divergence.diff
    assert '+      "content": "You are very careful."' in divergence.diff
    assert report.compared == len(SQLiteEventStore(db).read(run_id))
    with pytest.raises(AssertionError, match="the definition changed: system_prompt"):
        assert_replays(db, run_id, reworded)


def test_config_and_tool_schema_changes_are_caught_at_seq_1(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(parallel, db)
    changed_config = replay_run(
        db, run_id, lambda t: parallel().config(AgentConfig(min_answer_length=5))
    )
    change = changed_config.definition_change
    assert change is not None and change.seq == 1 and change.fields == ["config.min_answer_length"]
    assert changed_config.same_behaviour  # no request and no fact of this run depends on it

    @tool(name="lookup")
    def lookup_v2(key: str, exact: bool = False) -> str:
        """Look a key up."""
        return key

    def new_schema(task: str) -> AgentBuilder:
        b = base("parallel", [])
        b._tools._tools["lookup"] = lookup_v2  # the same tool, one more argument
        return b

    report = replay_run(db, run_id, new_schema)
    assert report.definition_change is not None and report.definition_change.seq == 1
    assert "exact" in report.definition_change.diff and report.definition_change.fields == ["tools"]
    divergence = report.divergence  # the LLM is offered the new schema from its first request
    assert divergence is not None and divergence.fields == ["tools_digest"]
    assert "the LLM request changed: tool schemas" in divergence.headline()
    assert '+          "exact": {' in divergence.diff


def test_a_handler_change_is_caught_at_the_first_fact_it_alters(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(SCENARIOS["reflection"], db)
    trace = Trace.load(SQLiteEventStore(db), run_id)
    first_low = next(e for e in trace if e.event == "ConfidenceLow")

    class TrustingPlanning(PlanningState):
        """A changed branch: never discard low-confidence calls."""

        def _tool_calls(self, ctx: RunContext, response: Any) -> str:
            return super()._tool_calls(ctx, response.model_copy(update={"confidence": 1.0}))

    report = replay_run(
        db, run_id, lambda t: SCENARIOS["reflection"]().handler("Planning", TrustingPlanning())
    )
    assert report.divergence is not None
    assert report.divergence.seq == first_low.seq
    assert report.divergence.expected is not None and report.divergence.actual is not None
    assert report.divergence.expected.event == "ConfidenceLow"
    assert report.divergence.actual.event == "ToolCallsPlanned"


def test_a_tool_change_is_caught_when_tools_are_executed(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(SCENARIOS["blacklist"], db)
    assert replay_run(db, run_id, lambda t: SCENARIOS["blacklist"](), execute_tools=True)

    @tool(name="lookup")
    def lookup_changed(key: str) -> str:
        """Look a key up."""
        return f"new value of {key}"

    def changed(task: str) -> AgentBuilder:
        b = SCENARIOS["blacklist"]()
        b._tools._tools["lookup"] = lookup_changed
        b._tools._digest = None
        return b

    assert replay_run(db, run_id, changed).identical  # recorded results are served
    report = replay_run(db, run_id, changed, execute_tools=True)
    assert report.divergence is not None
    assert report.divergence.expected is not None
    assert report.divergence.expected.event == "ToolExecuted"
    assert "new value of ok" in report.divergence.diff


def test_time_travel_equals_the_live_memory_at_every_seq(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = SCENARIOS["approvals"]().store(db).build()
    live: list[tuple[int, AgentMemory, str]] = []
    state = {"now": "Idle"}

    def watch(seq: int, recorded_in: str, fact: Any, memory: AgentMemory) -> None:
        if fact.kind == "Transitioned":
            state["now"] = fact.to_state
        live.append((seq, memory, state["now"]))

    engine.observe(watch)
    engine.run()
    assert [seq for seq, _, _ in live] == list(range(1, engine.seq + 1))
    for seq, memory, now in live:
        assert memory_at(db, engine.run_id, seq) == (memory, now)
    with pytest.raises(ValueError, match="seq 0 is not one of them"):
        memory_at(db, engine.run_id, 0)


def test_branch_with_another_llm_answer_and_diff(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(SCENARIOS["blacklist"], db)
    trace = Trace.load(SQLiteEventStore(db), run_id)
    refused = next(e for e in trace if e.event == "ToolsRejected")
    new_id = branch_run(
        db,
        run_id,
        at=refused.seq,
        llm_response=LlmResponse.final_answer("Changed my mind: " + LONG),
    ).run_id
    store = SQLiteEventStore(db)
    child = store.run(new_id)
    point = max(e.seq for e in trace if e.event == "Transitioned" and e.seq <= refused.seq)
    assert (child.parent_id, child.branch_seq, child.status) == (run_id, point, "done")
    branch = Trace.load(store, new_id)
    assert [e.fact for e in branch][:point] == [e.fact for e in trace][:point]
    assert branch[point].event == "RunBranched"
    memory, state = AgentMemory.rebuild(store, new_id)
    assert state == State.Done and memory.final_answer == "Changed my mind: " + LONG
    diff = diff_runs(store, run_id, new_id)
    assert diff.divergence is not None and diff.divergence.seq == point + 3
    assert diff.divergence.expected is not None and diff.divergence.actual is not None
    assert diff.divergence.expected.event == diff.divergence.actual.event == "LlmResponded"
    text = str(diff)
    assert f"B branched from A at seq {point}" in text and "Changed my mind" in text
    assert replay_run(db, new_id).identical  # a branch replays too
    itself = diff_runs(store, run_id, run_id)
    assert itself.divergence is None and "one run compared with itself" in str(itself)


def test_branch_with_a_tool_result_config_and_live_llm(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(SCENARIOS["blacklist"], db)
    trace = Trace.load(SQLiteEventStore(db), run_id)
    before_tool = next(e for e in trace if e.event == "ToolCallStarted").seq - 1
    new_id = branch_run(db, run_id, at=before_tool, tool_result="value of ok: 42").run_id
    memory, _ = AgentMemory.rebuild(SQLiteEventStore(db), new_id)
    assert memory.history[-1].observation == "SUCCESS: value of ok: 42"

    class Always:
        async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
            return LlmResponse.final_answer("A live model answered this branch.")

    live_id = branch_run(db, run_id, at=2, llm=Always(), config=AgentConfig(max_steps=1)).run_id
    memory, state = AgentMemory.rebuild(SQLiteEventStore(db), live_id)
    assert state == State.Done and memory.final_answer == "A live model answered this branch."
    assert memory.config.max_steps == 1
    assert SQLiteEventStore(db).run(live_id).branch_seq == 2


def test_unknown_run_names_the_closest_ids(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(lambda: base("t", [LlmResponse.final_answer(LONG)]).run_id("abc123def"), db)
    assert replay_run(db, "abc1", None).identical  # a unique prefix is enough
    with pytest.raises(UnknownRun, match="abc123def"):
        replay_run(db, "abc124def")
    assert run_id == "abc123def"


def test_replay_of_a_run_whose_recording_ran_out(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = record(lambda: base("t", [LlmResponse.tool_call("lookup", {"key": "a"})]), db)
    report = replay_run(db, run_id, lambda t: base("t", []))
    assert report.identical
    assert Event.FatalError in {
        e.fact.event for e in Trace.load(SQLiteEventStore(db), run_id) if e.event == "Transitioned"
    }


def test_the_first_divergence_is_the_first_fact_that_differs_or_where_one_run_ends(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    script = [LlmResponse.tool_call("lookup", {"key": "a"}), LlmResponse.final_answer(LONG)]
    entries = Trace.load(SQLiteEventStore(db), record(lambda: base("t", script), db)).entries()
    assert first_divergence(entries, list(entries)) is None
    cut = first_divergence(entries, entries[:-2])  # the replay stopped two facts early
    assert cut is not None and (cut.seq, cut.expected, cut.actual) == (
        entries[-2].seq,
        entries[-2],
        None,
    )
    more = first_divergence(entries[:-2], entries)  # ... or went on past the recording's end
    assert more is not None and (more.seq, more.expected, more.actual) == (
        entries[-2].seq,
        None,
        entries[-2],
    )
    at = next(n for n, e in enumerate(entries) if e.event == "ToolExecuted")
    swapped = [*entries[:at], entries[at + 1], entries[at], *entries[at + 2 :]]
    moved = first_divergence(entries, swapped)
    assert moved is not None and (moved.seq, moved.expected, moved.actual) == (
        entries[at].seq,
        entries[at],
        entries[at + 1],
    )


class ProcessDied(BaseException):
    """Stands for the process being killed during an LLM call."""


def test_a_run_that_died_in_an_llm_call_resumes_and_replays_identical(tmp_path: Path) -> None:
    from replay.resuming import resume_run

    db = tmp_path / "runs.db"
    calls = {"n": 0}

    class DiesOnce:
        async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
            calls["n"] += 1
            if calls["n"] == 2:
                raise ProcessDied()
            if not memory.history:
                return LlmResponse.tool_call("lookup", {"key": "a"}, id="c1")
            return LlmResponse.final_answer(LONG)

    def agent(task: str) -> AgentBuilder:
        return base(task, []).llm(DiesOnce())

    engine = agent("dies").store(db).run_id("r").build()
    with pytest.raises(ProcessDied):
        engine.run()
    store = SQLiteEventStore(db)
    assert store.read("r")[-1].kind == "LlmRequested"  # committed before the call
    assert replay_run(db, "r", agent).identical  # the interrupted run replays up to its end
    assert resume_run(db, "r", agent) == LONG
    kinds = [e.kind for e in store.read("r")]
    assert kinds.count("LlmRequested") == 3 and kinds.count("StepStarted") == 3
    report = replay_run(db, "r", agent)
    assert report.identical, str(report)


def test_a_prefix_shared_by_several_runs_is_named_ambiguous() -> None:
    store = SQLiteEventStore()
    for run_id in ("abc123", "abd999", "xyz"):
        store.create_run(run_id, "task")
    assert resolve_run(store, "abc") == "abc123"
    with pytest.raises(AmbiguousRunId, match=r"'ab' matches 2 runs \(abc123, abd999\)"):
        resolve_run(store, "ab")
    with pytest.raises(UnknownRun, match="Unknown run id 'q'"):
        resolve_run(store, "q")


def test_a_replay_that_wrote_the_recorded_texts_is_identical_without_building_its_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay compares what it wrote with what the log holds, text for text; any text or
    state that differs sends it to the fact-by-fact comparison, which says where."""
    import dataclasses

    from eventstore import NewEvent
    from replay.recording import Recording

    db = tmp_path / "runs.db"
    run_id = record(parallel, db)
    recording = Recording.load(SQLiteEventStore(db), run_id)
    written = [
        NewEvent(e.kind, e.payload, dict(e.meta), e.recorded_at, e.version)
        for e in SQLiteEventStore(db).read(run_id)
    ]
    assert len(written) == len(recording.entries) > 10
    assert recording.same_as_written(written)
    last = len(written) - 1
    changed = dataclasses.replace(written[last], payload=written[last].payload.replace("}", " }"))
    assert not recording.same_as_written([*written[:last], changed])
    moved = dataclasses.replace(written[2], meta={**written[2].meta, "state": "Elsewhere"})
    assert not recording.same_as_written([*written[:2], moved, *written[3:]])
    assert not recording.same_as_written(written[:-1])

    answers: list[bool] = []
    same = Recording.same_as_written

    def spied(self: Recording, events: Any) -> bool:
        answers.append(same(self, events))
        return answers[-1]

    monkeypatch.setattr(Recording, "same_as_written", spied)
    assert replay_run(db, run_id).identical
    assert answers == [True]  # the texts alone showed it
