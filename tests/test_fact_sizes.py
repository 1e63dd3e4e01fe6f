"""Smaller facts: a tool call is written once (in the LLM's response, or in the start of a
handler's own call) and named afterwards: the plan names the response's calls, starts and
results name a call by its place, and the observation names the step's results; a transition
leaves the state it left to the envelope. Everything that reads the log still gets each fact in
full."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from agentsm import (
    AgentBuilder,
    AgentMemory,
    HistoryEntry,
    LlmResponse,
    MockLlmCaller,
    ToolCall,
    ToolResult,
)
from agentsm import facts as f
from agentsm.context import RunContext
from agentsm.memory import as_stored, fold_with_state, in_full
from agentsm.states import ActingState
from agentsm.trace import Trace
from eventstore import EventStore, NewEvent, PayloadReader, SQLiteEventStore
from replay import Recording, branch_run, replay_run

LONG = "The answer, which is long enough to be accepted."


def lookup(args: dict[str, str]) -> str:
    return f"value of {args['key']}"


def agent(task: str = "look up two keys") -> AgentBuilder:
    script = [
        LlmResponse.tool_call("lookup", {"key": "a"}, id="c1"),
        LlmResponse.tool_call("lookup", {"key": "b"}, id="c1"),  # the same id again
        LlmResponse.final_answer(LONG),
    ]
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script))
        .tool("lookup", "Look a key up", {"type": "object"}, lookup)
    )


def stored(db: Path, run_id: str) -> list[tuple[str, int, dict[str, object]]]:
    with SQLiteEventStore(db) as store:
        return [(e.kind, e.version, json.loads(e.payload)) for e in store.read(run_id)]


def test_a_tool_call_is_written_once_and_named_by_its_place_afterwards(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = agent().store(db).build()
    run.run()
    rows = stored(db, run.run_id)
    started = [p for k, _, p in rows if k == "ToolCallStarted"]
    executed = [p for k, _, p in rows if k == "ToolExecuted"]
    assert started == [{"index": 0}, {"index": 0}]
    assert [p["observation"] for p in executed] == ["SUCCESS: value of a", "SUCCESS: value of b"]
    assert all("call" not in p for p in executed)
    assert all(v == 2 for k, v, _ in rows if k in ("ToolCallStarted", "ToolExecuted"))
    assert all("from_state" not in p for k, _, p in rows if k == "Transitioned")
    # the plan names the response's calls, the observation the step's results
    assert [p for k, _, p in rows if k == "ToolCallsPlanned"] == [{"parallel": False}] * 2
    assert [p for k, _, p in rows if k == "ObservationCommitted"] == [{"results": [0]}] * 2
    assert all(v == 2 for k, v, _ in rows if k in ("ToolCallsPlanned", "ObservationCommitted"))
    # read back, every call is given in full, and the log folds to the memory the run had
    trace = Trace.load(SQLiteEventStore(db), run.run_id)
    plans = [e.fact for e in trace if isinstance(e.fact, f.ToolCallsPlanned)]
    assert [[c.args["key"] for c in p.calls or ()] for p in plans] == [["a"], ["b"]]
    committed = [e.fact for e in trace if isinstance(e.fact, f.ObservationCommitted)]
    assert [[(h.tool.args["key"], h.observation) for h in c.entries or ()] for c in committed] == [
        [("a", "SUCCESS: value of a")],
        [("b", "SUCCESS: value of b")],
    ]
    assert all(c.results is None for c in committed)
    calls = [e.fact.call for e in trace if isinstance(e.fact, f.ToolExecuted)]
    assert [(c.name, c.args["key"]) for c in calls if c is not None] == [
        ("lookup", "a"),
        ("lookup", "b"),
    ]
    assert "lookup" in trace.format(None)
    moves = [e.fact for e in trace if isinstance(e.fact, f.Transitioned)]
    assert moves[0].from_state == "Idle" and moves[1].from_state == "Planning"
    assert fold_with_state(trace.facts())[0] == run.memory
    assert replay_run(db, run.run_id).identical


class OwnCall(ActingState):
    """Runs the planned calls, then a call of its own (not planned)."""

    async def handle(self, ctx):  # type: ignore[no-untyped-def]
        event = await super().handle(ctx)
        own = ToolCall(name="lookup", args={"key": f"own{ctx.memory.step}"}, id="own")
        await ctx.run_tools((own,), concurrent=False)
        assert ctx.memory.results[-1].call == own and ctx.memory.results[-1].index is None
        return event


def own_agent(task: str) -> AgentBuilder:
    return agent(task).handler("Acting", OwnCall())


def test_a_handlers_own_call_is_written_once_in_its_start(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = own_agent("own calls").store(db).build()
    run.run()
    rows = stored(db, run.run_id)
    started = [p for k, _, p in rows if k == "ToolCallStarted"]
    assert started[1] == {
        "index": 1,
        "call": {"name": "lookup", "args": {"key": "own1"}, "id": "own"},
    }
    executed = [p for k, _, p in rows if k == "ToolExecuted"]
    assert executed[1] == {"index": 1, "observation": "SUCCESS: value of own1", "success": True}
    recording = Recording.load(SQLiteEventStore(db), run.run_id)
    own = [e.fact for e in recording.entries if isinstance(e.fact, f.ToolExecuted)][1]
    assert own.call == ToolCall(name="lookup", args={"key": "own1"}, id="own")
    assert [e.call.args["key"] for e in recording.tool_effects] == ["a", "own1", "b", "own2"]
    assert replay_run(db, run.run_id, builder=own_agent).identical


def test_a_branch_copies_calls_by_their_place(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = agent().store(db).build()
    run.run()
    point = next(
        e.seq
        for e in Trace.load(SQLiteEventStore(db), run.run_id)
        if e.event == "ObservationCommitted"
    )
    child = branch_run(db, run.run_id, point + 1, tool_result="patched").run_id
    rows = stored(db, child)
    assert [p for k, _, p in rows if k == "ToolCallStarted"][0] == {"index": 0}
    assert [p for k, _, p in rows if k == "ToolCallsPlanned"][0] == {"parallel": False}
    assert [p for k, _, p in rows if k == "ObservationCommitted"][0] == {"results": [0]}
    assert all("from_state" not in p for k, _, p in rows if k == "Transitioned")


def test_facts_of_version_1_naming_the_call_in_full_still_fold_and_read(tmp_path: Path) -> None:
    """A log written before version 2: the calls in full, the places left to the fold."""
    db = tmp_path / "runs.db"
    run = agent().store(db).build()
    run.run()
    old = tmp_path / "old.db"
    trace = Trace.load(SQLiteEventStore(db), run.run_id)
    with SQLiteEventStore(old) as store:
        events = []
        for e in trace:
            payload = e.fact.model_dump(mode="json", exclude_none=True)
            version = f.FACTS.version(e.event)
            if e.event in ("ToolCallStarted", "ToolExecuted"):
                payload.pop("index")
                version = 1
            if e.event in ("ToolCallsPlanned", "ObservationCommitted"):
                assert "calls" in payload or payload["entries"]  # written in full
                version = 1
            events.append(
                NewEvent(
                    e.event,
                    json.dumps(payload),
                    json.dumps({"state": e.state, "step": e.step}),
                    e.timestamp,
                    version,
                )
            )
        store.create_run("old", "look up two keys", events=events, status="done")
        again = Trace.load(store, "old")
        assert [x.fact for x in again] == [x.fact for x in trace]
        assert fold_with_state(again.facts())[0] == run.memory
    assert replay_run(old, "old").identical


def test_a_fact_is_stored_by_name_only_where_it_is_the_same_in_full(tmp_path: Path) -> None:
    """`as_stored` leaves out only what `in_full` gives back exactly: a plan of other calls
    than the response's, or history entries that are not the step's results, stay whole."""
    db = tmp_path / "runs.db"
    run = agent().store(db).build()
    run.run()
    trace = Trace.load(SQLiteEventStore(db), run.run_id)
    facts = trace.facts()
    for i, fact in enumerate(facts):
        if not isinstance(fact, f.ToolCallsPlanned | f.ObservationCommitted):
            continue
        before = fold_with_state(facts[:i])[0]
        compact = as_stored(fact, before)
        assert compact != fact and in_full(compact, before) == fact
        if isinstance(fact, f.ToolCallsPlanned):
            other = fact.model_copy(update={"calls": (ToolCall(name="lookup", args={}),)})
            text = fact.model_copy(update={"text": "another text"})
            assert as_stored(other, before) == other and as_stored(text, before) == text
        else:
            entries = fact.entries or ()
            changed = entries[0].model_copy(update={"observation": "not what the tool said"})
            other = fact.model_copy(update={"entries": (changed,)})
            assert as_stored(other, before) == other
            more = fact.model_copy(update={"entries": (changed, *entries)})
            kept = as_stored(more, before)
            assert kept.entries == (changed,) and kept.results == (0,)
            assert in_full(kept, before) == more
    assert fold_with_state(facts)[0] == run.memory


def test_every_backend_reads_bare_rows_and_folds_and_traces_from_them(store: EventStore) -> None:
    run = agent().store(store).build()
    run.run()
    assert isinstance(store, PayloadReader)
    rows = store.read_payloads(run.run_id)
    stored = store.read(run.run_id)
    assert [r[:4] for r in rows] == [(e.seq, e.kind, e.version, e.payload) for e in stored]
    assert [json.loads(r[4]) for r in rows] == [e.meta for e in stored]
    assert [r[5] for r in rows] == [e.recorded_at for e in stored]
    assert [r[0] for r in store.read_payloads(run.run_id, after=3, upto=5)] == [4, 5]
    assert AgentMemory.rebuild(store, run.run_id) == (run.memory, run.current_state())
    trace = Trace.load(store, run.run_id)
    assert [e.seq for e in trace] == [e.seq for e in stored]
    assert [(e.step, e.state) for e in trace] == [(e.meta["step"], e.meta["state"]) for e in stored]
    assert len(Trace.load(store, run.run_id, upto=6)) == 6


def test_a_store_for_one_thread_commits_on_that_thread(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "runs.db", threaded=False)
    run = agent().store(store).build()
    run.run()
    assert f"writer of {store.path}" not in {t.name for t in threading.enumerate()}
    assert store.transactions >= 2 and replay_run(store, run.run_id).identical


def coercing_agent(task: str, seen: list[object]) -> AgentBuilder:
    """Its Planning turns the LLM's `1` into the `true` the tool's schema asks for."""

    async def planning(ctx: RunContext) -> str:
        ctx.record(f.StepStarted(step=ctx.memory.step + 1))
        outcome = await ctx.call_llm("plan")
        assert isinstance(outcome, f.LlmResponded)
        response = outcome.response
        if not response.calls:
            ctx.record(f.FinalAnswerProduced(content=response.content or ""))
            return "LlmFinalAnswer"
        calls = tuple(
            c.model_copy(update={"args": {"flag": bool(c.args["flag"])}}) for c in response.calls
        )
        ctx.record(f.ToolCallsPlanned(calls=calls, parallel=False, text=response.content))
        return "LlmToolCall"

    def check(args: dict[str, object]) -> str:
        seen.append(args["flag"])
        return "checked"

    schema = {"type": "object", "properties": {"flag": {"type": "boolean"}}}
    script = [LlmResponse.tool_call("check", {"flag": 1}, id="c1"), LlmResponse.final_answer(LONG)]
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script))
        .tool("check", "Check a flag", schema, check)
        .handler("Planning", planning)
    )


def test_a_plan_equal_to_the_response_only_in_python_is_written_in_full(tmp_path: Path) -> None:
    """1 == True in Python, but JSON and the tool tell them apart: a plan that turns the
    response's 1 into true is a plan of other calls, and the tool gets true."""
    db, seen = tmp_path / "runs.db", list[object]()
    run = coercing_agent("coerce", seen).store(db).build()
    run.run()
    assert seen == [True] and type(seen[0]) is bool
    plan = next(p for k, _, p in stored(db, run.run_id) if k == "ToolCallsPlanned")
    assert json.dumps(plan["calls"]) == '[{"name": "check", "args": {"flag": true}, "id": "c1"}]'
    assert type(run.memory.history[0].tool.args["flag"]) is bool
    assert replay_run(db, run.run_id, builder=lambda task: coercing_agent(task, [])).identical


def test_entries_equal_to_the_results_only_in_python_are_written_in_full() -> None:
    """An observation whose entries differ from the step's results as JSON does (1.0 for 1)
    is kept whole: naming the results would read back other values."""
    call = ToolCall(name="lookup", args={"n": 1}, id="c1")
    memory = AgentMemory(task="t", step=1, planned_calls=(call,)).model_copy(
        update={"results": (ToolResult(call=call, observation="ok", success=True, index=0),)}
    )
    loose = call.model_copy(update={"args": {"n": 1.0}})
    entry = HistoryEntry(step=1, tool=loose, observation="ok", success=True)
    fact = f.ObservationCommitted(entries=(entry,))
    kept = as_stored(fact, memory)
    assert kept == fact and kept.results is None
    assert in_full(kept, memory).model_dump_json() == fact.model_dump_json()


class FixedFlag(ActingState):
    """Runs the planned call again as a call of its own, with the true its schema asks for
    where the LLM gave 1."""

    async def handle(self, ctx: RunContext) -> str:
        call = ctx.memory.planned_calls[0]
        await ctx.run_tools((call.model_copy(update={"args": {"flag": True}}),), concurrent=False)
        return "ToolSuccess"


def test_a_handlers_call_equal_to_a_planned_one_only_in_python_is_its_own(tmp_path: Path) -> None:
    """The log says which call ran: one with true is not the planned call with 1."""
    db, seen = tmp_path / "runs.db", list[object]()

    def check(args: dict[str, object]) -> str:
        seen.append(args["flag"])
        return "checked"

    script = [LlmResponse.tool_call("check", {"flag": 1}, id="c1"), LlmResponse.final_answer(LONG)]
    schema = {"type": "object", "properties": {"flag": {"type": "boolean"}}}
    run = (
        AgentBuilder("own call")
        .llm(MockLlmCaller(script))
        .tool("check", "Check a flag", schema, check)
        .handler("Acting", FixedFlag())
        .store(db)
        .build()
    )
    run.run()
    assert seen == [True]
    started = [p for k, _, p in stored(db, run.run_id) if k == "ToolCallStarted"]
    assert json.dumps(started) == (
        '[{"index": 1, "call": {"name": "check", "args": {"flag": true}, "id": "c1"}}]'
    )
    trace = Trace.load(SQLiteEventStore(db), run.run_id)
    ran = [e.fact.call for e in trace if isinstance(e.fact, f.ToolExecuted)]
    assert [c.args["flag"] if c is not None else None for c in ran] == [True]
    assert type(ran[0].args["flag"] if ran[0] is not None else None) is bool
