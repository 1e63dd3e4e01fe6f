"""Your own facts: a user's fact type and reducer over a part of memory, recorded by a custom
state that declares it, folded, replayed, branched, resumed, upcast, read without its type, and
covered by the property kit; on real SQLite files."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agentsm import (
    AgentBuilder,
    AgentMemory,
    BuildError,
    CustomFact,
    LlmResponse,
    MockLlmCaller,
    OwnershipViolation,
    RunContext,
    State,
    Trace,
    UnknownFact,
    UnreadableFact,
    UnrecordableFact,
    build_transition_table,
)
from agentsm import facts as f
from agentsm.codec import FactCodec
from agentsm.facts import FACTS
from agentsm.states import ObservingState
from agentsm.testing import AgentMachine, AgentRun, ToolBehaviour, agent_runs, check_table
from agentsm.trace import decoded
from agentsm.transitions import TransitionTable
from eventstore import NewEvent, SQLiteEventStore
from replay import ImportRefused, branch_run, export_run, import_runs, replay_run, resume_run
from replay.cli import main

from .scenarios import LONG, lookup

ROOT = Path(__file__).resolve().parent.parent


class TicketRaised(CustomFact):
    """A ticket the Filing state raised about the step's observation."""

    kind: Literal["TicketRaised"] = "TicketRaised"
    number: int
    title: str


class PriorityMarked(CustomFact):
    """Version 2: the level became a word (version 1 held a number)."""

    kind: Literal["PriorityMarked"] = "PriorityMarked"
    version: ClassVar[int] = 2
    level: str


@FACTS.register("PriorityMarked", 1)
def _level_as_word(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "level": {1: "low", 2: "high"}.get(data["level"], "unknown")}


def raise_ticket(tickets: tuple[str, ...], fact: TicketRaised) -> tuple[str, ...]:
    return (*tickets, fact.title)


def mark(levels: Any, fact: PriorityMarked) -> Any:
    return levels + [fact.level]  # an array of a part concatenates with lists too


class FilingState:
    """Between Observing and Planning: raises a ticket about the last observation."""

    name = "Filing"
    emits = frozenset({"Filed"})
    records: ClassVar[frozenset[Any]] = frozenset({TicketRaised, PriorityMarked})

    async def handle(self, ctx: RunContext) -> str:
        last = ctx.memory.history[-1].observation if ctx.memory.history else "nothing"
        number = len(ctx.memory.part("tickets")) + 1
        ctx.record(TicketRaised(number=number, title=f"#{number}: {last[:30]}"))
        ctx.record(PriorityMarked(level="high" if number > 1 else "low"))
        return "Filed"


def ticket_table() -> TransitionTable:
    rows = dict(build_transition_table())
    rows[(State.Observing, "Continue")] = "Filing"
    rows[("Filing", "Filed")] = State.Planning
    return TransitionTable(rows)


def ticket_agent(task: str, script: list[Any] | None = None) -> AgentBuilder:
    """An agent whose custom state records the user's own facts."""
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(script if script is not None else []))
        .tool(lookup)
        .transitions(ticket_table())
        .handler("Filing", FilingState())
        .fact(TicketRaised, raise_ticket, part="tickets", initial=[])
        .fact(PriorityMarked, mark, part="levels", initial=[])
    )


SCRIPT = [
    LlmResponse.tool_call("lookup", {"key": "a"}, id="c1"),
    LlmResponse.tool_call("lookup", {"key": "b"}, id="c2"),
    LlmResponse.final_answer(LONG),
]


def agent(task: str) -> AgentBuilder:
    return ticket_agent(task, list(SCRIPT))


@pytest.fixture(autouse=True)
def _real_reducers() -> Iterator[None]:
    """Registrations are process-wide: a test that swaps a reducer in cannot leave it behind,
    even when it fails."""
    yield
    agent("restore the reducers")


def record(db: Path, run_id: str = "r") -> AgentMemory:
    engine = agent("file tickets").store(db).run_id(run_id).build()
    assert engine.run() == LONG
    return engine.memory


def seqs(db: Path, run_id: str, kind: str) -> list[int]:
    return [e.seq for e in Trace.load(SQLiteEventStore(db), run_id) if e.event == kind]


# -- recorded, folded, read back ----------------------------------------------------------------


def test_a_custom_state_records_its_facts_and_they_fold_into_their_parts(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    memory = record(db)
    assert memory.part("tickets") == ("#1: SUCCESS: value of a", "#2: SUCCESS: value of b")
    levels = memory.part("levels")
    assert levels == ("low", "high") and levels == ["low", "high"]  # a tuple, equal to a list
    assert json.loads(memory.model_dump_json())["parts"]["tickets"][1].startswith("#2")
    with pytest.raises(KeyError, match="no part 'nope'.*part='nope'"):
        memory.part("nope")

    store = SQLiteEventStore(db)  # another store object on the same file
    assert AgentMemory.rebuild(store, "r") == (memory, State.Done)
    trace = Trace.load(store, "r")
    started = trace[0].fact
    assert isinstance(started, f.RunStarted)
    assert started.custom_facts == {"PriorityMarked": "levels", "TicketRaised": "tickets"}
    assert started.parts == {"levels": [], "tickets": []}
    raised = [e for e in trace if e.event == "TicketRaised"]
    assert [e.state for e in raised] == ["Filing", "Filing"]
    assert raised[0].fact == TicketRaised(number=1, title="#1: SUCCESS: value of a")
    assert raised[0].data == "number=1 title='#1: SUCCESS: value of a'"
    stored = {e.seq: e for e in store.read("r")}
    assert stored[raised[0].seq].meta["custom"] is True
    assert "custom" not in stored[1].meta  # built-in facts are stored as before


def test_replay_is_identical_and_changes_show_where_they_alter_a_fact(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    record(db)
    assert replay_run(db, "r", agent).identical
    raised = seqs(db, "r", "TicketRaised")

    def forgetful(tickets: tuple[str, ...], fact: TicketRaised) -> tuple[str, ...]:
        return tickets  # the changed reducer: the second ticket gets number 1 again

    def changed_reducer(task: str) -> AgentBuilder:
        return agent(task).fact(TicketRaised, forgetful, part="tickets", initial=[])

    report = replay_run(db, "r", changed_reducer)
    assert report.divergence is not None and report.divergence.seq == raised[1]
    assert report.divergence.expected is not None and report.divergence.actual is not None
    assert report.divergence.expected.event == report.divergence.actual.event == "TicketRaised"
    agent("restore the reducer")  # registrations are process-wide: the latest reducer folds

    class LoudFiling(FilingState):
        async def handle(self, ctx: RunContext) -> str:
            ctx.record(TicketRaised(number=0, title="LOUD"))
            ctx.record(PriorityMarked(level="low"))
            return "Filed"

    report = replay_run(db, "r", lambda t: agent(t).handler("Filing", LoudFiling()))
    assert report.divergence is not None and report.divergence.seq == raised[0]
    assert "LOUD" in report.divergence.diff

    def without_facts(task: str) -> AgentBuilder:
        return AgentBuilder(task).llm(MockLlmCaller([])).tool(lookup).transitions(ticket_table())

    report = replay_run(db, "r", lambda t: without_facts(t).handler("Filing", lambda ctx: "Filed"))
    change = report.definition_change  # the definition says so first, at seq 1
    assert change is not None and change.seq == 1
    assert change.fields == ["custom_facts", "parts"]
    assert report.divergence is not None and report.divergence.seq == raised[0]


def test_a_branch_keeps_the_facts_before_its_point_and_replays(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    record(db)
    first = seqs(db, "r", "TicketRaised")[0]
    answer = LlmResponse.final_answer("Branched: " + LONG)
    child = branch_run(db, "r", first + 3, llm_response=answer, builder=agent).run_id
    store = SQLiteEventStore(db)
    memory, state = AgentMemory.rebuild(store, child)
    assert state == State.Done and memory.final_answer == "Branched: " + LONG
    assert memory.part("tickets") == ("#1: SUCCESS: value of a",)
    copied = [e for e in store.read(child) if e.kind == "TicketRaised"]
    assert len(copied) == 1 and copied[0].meta["custom"] is True
    assert replay_run(db, child, agent).identical


class ProcessDied(BaseException):
    """Stands for the process being killed during an LLM call."""


def test_a_stopped_run_resumes_with_its_parts_and_replays(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    calls = {"n": 0}

    class DiesOnce:
        async def call(self, memory: AgentMemory, tools: Any, model: str) -> LlmResponse:
            calls["n"] += 1
            if calls["n"] == 3:
                raise ProcessDied()
            return SCRIPT[min(len(memory.part("tickets")), 2)]

    def dying(task: str) -> AgentBuilder:
        return ticket_agent(task).llm(DiesOnce())

    engine = dying("stops").store(db).run_id("r").build()
    with pytest.raises(ProcessDied):
        engine.run()
    assert AgentMemory.rebuild(SQLiteEventStore(db), "r")[0].part("tickets") == (
        "#1: SUCCESS: value of a",
        "#2: SUCCESS: value of b",
    )
    assert resume_run(db, "r", dying) == LONG
    memory, state = AgentMemory.rebuild(SQLiteEventStore(db), "r")
    assert state == State.Done and len(memory.part("tickets")) == 2
    assert replay_run(db, "r", dying).identical


# -- versions, and logs read where the user's code is not imported ------------------------------


def _copy_run(db: Path, source: str, target: str, change: Any, upto: int | None = None) -> None:
    """A new run with the events of `source` (up to seq `upto`), each passed through `change`."""
    store = SQLiteEventStore(db)
    events = [
        change(NewEvent(e.kind, e.payload, json.dumps(e.meta), e.recorded_at, e.version))
        for e in store.read(source, upto=upto)
    ]
    task = store.run(source).task  # what its RunStarted says, as a catalog holds it
    store.create_run(target, task, events=events, status="done" if upto is None else "running")


def test_an_old_version_of_a_users_fact_is_upcast_on_read(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    record(db)

    def old(e: NewEvent) -> NewEvent:
        if e.kind != "PriorityMarked":
            return e
        level = 1 if json.loads(e.payload)["level"] == "low" else 2
        return NewEvent(e.kind, json.dumps({"level": level}), e.meta, e.recorded_at, 1)

    _copy_run(db, "r", "old", old)
    store = SQLiteEventStore(db)
    assert [e.version for e in store.read("old") if e.kind == "PriorityMarked"] == [1, 1]
    marked = [e.fact for e in Trace.load(store, "old") if e.event == "PriorityMarked"]
    assert marked == [PriorityMarked(level="low"), PriorityMarked(level="high")]
    assert AgentMemory.rebuild(store, "old")[0].part("levels") == ("low", "high")
    assert replay_run(db, "old", agent).identical


def test_an_unregistered_kind_reads_generically_and_folds_to_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    record(db)

    def renamed(e: NewEvent) -> NewEvent:  # a kind no code in this process registers
        kind = "TicketFromElsewhere" if e.kind == "TicketRaised" else e.kind
        return NewEvent(kind, e.payload, e.meta, e.recorded_at, e.version)

    _copy_run(db, "r", "other", renamed)
    store = SQLiteEventStore(db)
    trace = Trace.load(store, "other")
    unknown = [e for e in trace if e.event == "TicketFromElsewhere"]
    assert len(unknown) == 2 and all(isinstance(e.fact, UnknownFact) for e in unknown)
    fact = unknown[0].fact
    assert isinstance(fact, UnknownFact)
    assert fact.kind == "TicketFromElsewhere" and fact.payload["number"] == 1
    assert fact.model_dump(mode="json") == {
        "kind": "TicketFromElsewhere",
        "number": 1,
        "title": "#1: SUCCESS: value of a",
    }
    assert FACTS.encode(fact) == store.read("other")[unknown[0].seq - 1].payload
    memory, state = AgentMemory.rebuild(store, "other")
    assert state == State.Done and memory.part("tickets") == ()  # its part stays as it was
    assert memory.part("levels") == ("low", "high")

    assert main(["--db", str(db), "show", "other"]) == 0
    out = capsys.readouterr().out
    assert "TicketFromElsewhere" in out and "(type not registered here) number=1" in out
    lines = list(export_run(store, "other"))
    copy = SQLiteEventStore(tmp_path / "copy.db")
    import_runs(copy, lines)  # nothing is lost on the way
    assert [e.payload for e in copy.read("other")] == [e.payload for e in store.read("other")]

    def unmarked(e: NewEvent) -> NewEvent:  # written by other software, not as a user's fact
        meta = json.loads(e.meta)
        meta.pop("custom", None)  # the rest of the envelope kept (a transition's source state)
        return NewEvent(e.kind, e.payload, json.dumps(meta), e.recorded_at, e.version)

    _copy_run(db, "other", "unmarked", unmarked)
    read = [e.fact for e in Trace.load(store, "unmarked")]  # reading never loses it
    assert [x.kind for x in read if isinstance(x, UnknownFact)] == ["TicketFromElsewhere"] * 2
    assert main(["--db", str(db), "show", "unmarked"]) == 0
    capsys.readouterr()
    with pytest.raises(ImportRefused, match="knows no fact kind 'TicketFromElsewhere'") as bad:
        import_runs(SQLiteEventStore(tmp_path / "strict.db"), export_run(store, "unmarked"))
    assert ".." not in str(bad.value)  # one sentence ends once

    def first(e: NewEvent) -> NewEvent:  # a run begins with a RunStarted this code knows
        return NewEvent("Begun", e.payload, e.meta, e.recorded_at) if e.kind == "RunStarted" else e

    _copy_run(db, "r", "headless", first)
    with pytest.raises(UnreadableFact, match="knows no fact kind 'Begun'"):
        Trace.load(store, "headless")


def test_a_run_is_not_continued_without_the_reducers_of_its_facts(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    record(db)
    cut = seqs(db, "r", "TicketRaised")[1] + 2  # stopped after the second ticket

    def renamed(e: NewEvent) -> NewEvent:
        kind = "TicketFromElsewhere" if e.kind == "TicketRaised" else e.kind
        return NewEvent(kind, e.payload, e.meta, e.recorded_at, e.version)

    _copy_run(db, "r", "undeclared", renamed, upto=cut)
    with pytest.raises(UnreadableFact, match="knows no fact kind 'TicketFromElsewhere'"):
        resume_run(db, "undeclared", agent)

    def declared(e: NewEvent) -> NewEvent:  # its definition names the kind: the user's own
        if e.kind == "RunStarted":
            started = json.loads(e.payload)
            started["custom_facts"]["TicketFromElsewhere"] = "tickets"
            return NewEvent(e.kind, json.dumps(started), e.meta, e.recorded_at, e.version)
        return renamed(e)

    _copy_run(db, "r", "declared", declared, upto=cut)
    with pytest.raises(BuildError, match="records TicketFromElsewhere .*does not register"):
        resume_run(db, "declared", agent)
    assert SQLiteEventStore(db).run("declared").last_seq == cut  # nothing was added


def test_the_cli_shows_a_users_fact_without_the_users_code(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    record(db)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "replay", "--db", str(db), *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )

    shown = cli("show", "r")
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if "TicketRaised" in x)
    assert "Filing" in line and "(type not registered here) number=1" in line
    full = cli("show", "r", "--json", "--kind", "TicketRaised")
    assert full.returncode == 0, full.stderr
    facts = [json.loads(x)["fact"] for x in full.stdout.splitlines()]
    assert facts[1] == {"kind": "TicketRaised", "number": 2, "title": "#2: SUCCESS: value of b"}
    memory = cli("memory", "r", "--json")
    assert memory.returncode == 0, memory.stderr
    parts = json.loads(memory.stdout)["memory"]["parts"]
    assert parts == {"levels": [], "tickets": []}  # no reducer here: the parts as they began
    text = cli("memory", "r").stdout  # and says so, naming the kinds it could not fold
    assert "part tickets" in text and "not folded: TicketRaised not registered here" in text
    for args in (("runs",), ("export", "r")):
        done = cli(*args)
        assert done.returncode == 0, done.stderr
    assert "TicketRaised" in cli("export", "r").stdout
    # the builder registers the types when it is called, after the recording was first read
    replayed = cli("replay", "r", "--builder", "tests.test_custom_facts:agent")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "identical" in replayed.stdout


# -- ownership and registration -----------------------------------------------------------------


def _aborted(db: Path, run_id: str) -> f.RunAborted:
    last = Trace.load(SQLiteEventStore(db), run_id)[-1].fact
    assert isinstance(last, f.RunAborted)
    return last


def test_a_state_records_only_the_facts_it_declares(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    def sneaky(ctx: RunContext) -> str:
        ctx.record(TicketRaised(number=1, title="undeclared"))
        return "Filed"

    engine = agent("t").handler("Filing", sneaky).store(db).run_id("a").build()
    with pytest.raises(OwnershipViolation, match="State Filing recorded TicketRaised, which its"):
        engine.run()
    assert _aborted(db, "a").error_type == "OwnershipViolation"
    assert "TicketRaised" not in [e.kind for e in SQLiteEventStore(db).read("a")]

    class TalkativeObserving(ObservingState):
        async def handle(self, ctx: RunContext) -> str:
            ctx.record(TicketRaised(number=1, title="from a built-in state"))
            return await super().handle(ctx)

    engine = agent("t").handler(State.Observing, TalkativeObserving()).store(db).run_id("b")
    with pytest.raises(OwnershipViolation, match="State Observing recorded TicketRaised"):
        engine.build().run()
    declared = agent("t").handler(
        State.Observing, TalkativeObserving(), records=[TicketRaised]
    )  # declared: a built-in state may record it
    assert declared.store(db).run_id("c").build().run() == LONG
    tickets = AgentMemory.rebuild(SQLiteEventStore(db), "c")[0].part("tickets")
    assert tickets == (  # Observing's before each of Filing's
        "from a built-in state",
        "#2: SUCCESS: value of a",
        "from a built-in state",
        "#4: SUCCESS: value of b",
    )

    def strict(ctx: RunContext) -> str:  # declares its facts: records nothing else
        ctx.record(TicketRaised(number=1, title="fine"))
        ctx.record(f.ReflectionSkipped(reason="not declared"))
        return "Filed"

    engine = agent("t").handler("Filing", strict, records=["TicketRaised"]).store(db).run_id("d")
    with pytest.raises(OwnershipViolation, match="declares TicketRaised.*ReflectionSkipped"):
        engine.build().run()

    def lax(ctx: RunContext) -> str:  # declares nothing: built-in facts as before
        ctx.record(f.ReflectionSkipped(reason="a custom state's own note"))
        return "Filed"

    engine = agent("t").handler("Filing", lax).store(db).run_id("e").build()
    assert engine.run() == LONG


def test_bad_registrations_are_refused_with_what_to_do() -> None:
    class Forged(CustomFact):
        kind: Literal["FinalAnswerProduced"] = "FinalAnswerProduced"

    with pytest.raises(BuildError, match="built-in fact of agentsm"):
        AgentBuilder("t").fact(Forged, raise_ticket, part="x")

    class TwinTicket(CustomFact):
        kind: Literal["TicketRaised"] = "TicketRaised"
        number: int

    with pytest.raises(BuildError, match="registered already.*rename one"):
        AgentBuilder("t").fact(TwinTicket, raise_ticket, part="tickets")

    class Loose(BaseModel):
        kind: Literal["Loose"] = "Loose"

    with pytest.raises(BuildError, match="Loose is not frozen"):
        AgentBuilder("t").fact(Loose, raise_ticket, part="x")

    class Kindless(CustomFact):
        title: str

    with pytest.raises(BuildError, match="needs a field kind"):
        AgentBuilder("t").fact(Kindless, raise_ticket, part="x")

    class Fine(CustomFact):
        kind: Literal["FineNoted"] = "FineNoted"

    with pytest.raises(BuildError, match="initial value of part 'x'.*set"):
        AgentBuilder("t").fact(Fine, raise_ticket, part="x", initial={1, 2})
    with pytest.raises(BuildError, match="must be a function"):
        AgentBuilder("t").fact(Fine, "not callable", part="x")  # type: ignore[arg-type]
    with pytest.raises(BuildError, match="folds into the part 'tickets' already.*restart"):
        AgentBuilder("t").fact(TicketRaised, raise_ticket, part="elsewhere")
    with pytest.raises(BuildError, match="starts as"):
        agent("t").fact(Fine, raise_ticket, part="tickets", initial=["x"])

    unregistered = (
        AgentBuilder("t")
        .llm(MockLlmCaller([]))
        .transitions(ticket_table())
        .handler("Filing", lambda ctx: "Filed", records=["NeverRegistered"])
    )
    with pytest.raises(BuildError, match="declares it records NeverRegistered.*\\.fact\\("):
        unregistered.build()


def test_check_table_reports_declared_facts_that_are_not_registered() -> None:
    class Undeclared:
        name = "Filing"
        emits = frozenset({"Filed"})
        records = frozenset({"NeverRegistered", "TicketRaised"})

        async def handle(self, ctx: RunContext) -> str:
            return "Filed"

    report = check_table(ticket_table(), {"Filing": Undeclared()})
    assert [p.kind for p in report.problems] == ["unregistered-fact"]
    assert "NeverRegistered, which is not a registered fact kind" in str(report)
    assert check_table(ticket_table(), {"Filing": FilingState()}).ok

    class GreedyObserving(ObservingState):
        records = frozenset({"FinalAnswerProduced"})

    report = check_table(build_transition_table(), {State.Observing: GreedyObserving()})
    assert [p.kind for p in report.problems] == ["not-owner"]


def test_a_reducer_that_gives_what_memory_cannot_hold_records_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    def as_set(tickets: Any, fact: TicketRaised) -> Any:
        return {fact.title}

    engine = (
        agent("t")
        .fact(TicketRaised, as_set, part="tickets", initial=[])
        .store(db)
        .run_id("r")
        .build()
    )
    try:
        with pytest.raises(UnrecordableFact, match="reducer as_set gave part 'tickets'.*set"):
            engine.run()
    finally:
        agent("restore the reducer")
    assert "TicketRaised" not in [e.kind for e in SQLiteEventStore(db).read("r")]


# -- the property kit --------------------------------------------------------------------------

QUICK = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    phases=[p for p in Phase if p is not Phase.explain],
)


@QUICK
@given(agent_runs(builder=ticket_agent))
def test_generated_runs_of_a_custom_state_agent_keep_every_invariant(run: AgentRun) -> None:
    run.assert_invariants()
    memory = run.engine.memory
    raised = [o for o in run.observed if o.fact.kind == "TicketRaised"]
    assert len(memory.part("tickets")) == len(raised)


TestTicketAgentMachine = AgentMachine.for_builder(ticket_agent).TestCase
TestTicketAgentMachine.settings = settings(
    max_examples=5,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)


def test_the_kit_catches_an_impure_reducer() -> None:
    seen = {"n": 0}

    def impure(tickets: tuple[str, ...], fact: TicketRaised) -> tuple[str, ...]:
        seen["n"] += 1  # the planted bug: the fold depends on how often it ran
        return (*tickets, f"{fact.title} (fold {seen['n']})")

    def leaky(task: str) -> AgentBuilder:
        return ticket_agent(task).fact(TicketRaised, impure, part="tickets", initial=[])

    quick = settings(QUICK, phases=[Phase.explicit, Phase.generate], max_examples=60)

    @quick
    @given(agent_runs(builder=leaky, behaviours=st.just(ToolBehaviour("success", "ok"))))
    def prop(run: AgentRun) -> None:
        run.assert_invariants()

    try:
        with pytest.raises(AssertionError, match="folding the log gives another memory"):
            prop()
    finally:
        agent("restore the reducer")


def test_the_viewer_shows_a_users_fact(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the web viewer needs the ui extra")
    from fastapi.testclient import TestClient

    from replay.ui import Viewer, create_app

    db = tmp_path / "runs.db"
    record(db)
    api = TestClient(create_app(Viewer(db)), base_url="http://127.0.0.1")
    facts = api.get("/api/runs/r").json()["facts"]
    raised = [x for x in facts if x["kind"] == "TicketRaised"]
    assert [x["state"] for x in raised] == ["Filing", "Filing"]
    title = "#1: SUCCESS: value of a"
    assert raised[0]["fact"] == {"kind": "TicketRaised", "number": 1, "title": title}
    memory = api.get("/api/runs/r/memory", params={"seq": raised[0]["seq"]}).json()
    assert memory["memory"]["parts"]["tickets"] == [title]


def test_redaction_hooks_rewrite_the_users_facts_too(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = agent("t").redact(r"value of \w").store(db).run_id("r").build()
    assert engine.run() == LONG
    titles = [
        json.loads(e.payload)["title"]
        for e in SQLiteEventStore(db).read("r")
        if e.kind == "TicketRaised"
    ]
    assert titles == ["#1: SUCCESS: [REDACTED]", "#2: SUCCESS: [REDACTED]"]


class StateNoted(CustomFact):
    """A user's fact that leaves the state that recorded it to the envelope, as `Transitioned`
    does, and has a field that is not plain but is usually None."""

    kind: Literal["StateNoted"] = "StateNoted"
    enveloped: ClassVar[dict[str, str]] = {"where": "state"}
    where: str
    ticket: TicketRaised | None = None


def test_a_users_fact_is_encoded_with_the_built_in_facts_shortcuts() -> None:
    codec = FactCodec(FACTS.types)  # its own codec: the process-wide one stays as it is
    codec.add(StateNoted)
    envelope = {"state": "Filing", "step": 3}
    noted = StateNoted(where="Filing")
    text = codec.encode(noted, envelope)
    assert json.loads(text) == {}  # the state is the envelope's; the None is left out
    assert codec.decode(text, "StateNoted", meta=envelope) == noted
    elsewhere = StateNoted(where="Planning", ticket=TicketRaised(number=1, title="t"))
    text = codec.encode(elsewhere, envelope)  # not the envelope's state: written out
    assert json.loads(text) == {
        "where": "Planning",
        "ticket": {"kind": "TicketRaised", "number": 1, "title": "t"},
    }
    assert codec.decode(text, "StateNoted", meta=envelope) == elsewhere
    assert codec.encode(noted, envelope) == "{}"  # written once per value, the same again


class StepNoted(CustomFact):
    """A user's fact that leaves the step it was recorded at to the envelope."""

    kind: Literal["StepNoted"] = "StepNoted"
    enveloped: ClassVar[dict[str, str]] = {"at": "step"}
    at: int


class NotingState:
    """Between Observing and Planning: notes the step, which the envelope holds."""

    name = "Filing"
    emits = frozenset({"Filed"})
    records: ClassVar[frozenset[Any]] = frozenset({StepNoted})

    async def handle(self, ctx: RunContext) -> str:
        ctx.record(StepNoted(at=ctx.memory.step))
        return "Filed"


def noting_agent(task: str) -> AgentBuilder:
    return (
        AgentBuilder(task)
        .llm(MockLlmCaller(list(SCRIPT)))
        .tool(lookup)
        .transitions(ticket_table())
        .handler("Filing", NotingState())
        .fact(StepNoted, lambda steps, fact: [*steps, fact.at], part="noted", initial=[])
    )


def test_a_fact_that_leaves_its_step_to_the_envelope_reads_back_at_each_step(
    tmp_path: Path,
) -> None:
    """Readers decode an equal payload once per envelope value the kind takes: the same text
    recorded at two steps is two facts when the kind takes the step (a transition, taking the
    state alone, is decoded once for every step)."""
    db = tmp_path / "runs.db"
    noting_agent("t").store(db).run_id("r").build().run()
    store = SQLiteEventStore(db)
    assert [e.payload for e in store.read("r") if e.kind == "StepNoted"] == ["{}", "{}"]
    trace = Trace.load(store, "r")
    assert [(e.step, e.fact) for e in trace if e.event == "StepNoted"] == [
        (1, StepNoted(at=1)),
        (2, StepNoted(at=2)),
    ]
    assert [fact for _, fact in decoded(store.read("r")) if isinstance(fact, StepNoted)] == [
        StepNoted(at=1),
        StepNoted(at=2),
    ]
    assert AgentMemory.rebuild(store, "r")[0].part("noted") == (1, 2)
    assert replay_run(db, "r", noting_agent).identical
