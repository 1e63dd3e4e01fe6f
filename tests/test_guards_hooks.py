"""Input guards and hooks: a guard checks each user message before the LLM is sent it (allow,
replace, refuse), turn hooks may end a run, tool hooks may veto a call, change its arguments or
what the LLM reads of its result. Every effect is a fact, folded into memory, redacted like the
rest, and served back by replay where it was recorded, without calling the hooks: a refusal,
a replacement and an abort replay as recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings

from agentsm import (
    Abort,
    AgentBuilder,
    AgentEngine,
    AgentFailed,
    BuildError,
    Event,
    GuardInput,
    HandlerCrashed,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    Refuse,
    Replace,
    State,
    ToolCall,
    ToolCallInfo,
    TurnInfo,
    Veto,
    build_transition_table,
    tool,
)
from agentsm import facts as f
from agentsm.memory import fold
from agentsm.testing import AgentRun, agent_runs, sample_agent
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import assert_replays, branch_run, decide, replay_run, resume_run
from replay.cli import cli

ANSWER = "It is sunny in Lyon today, by all accounts."


class Calls:
    """What the tools and hooks were called with, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def __call__(self, who: str, what: Any) -> None:
        self.seen.append((who, what))

    def of(self, who: str) -> list[Any]:
        return [what for name, what in self.seen if name == who]


def weather_tool(calls: Calls) -> Any:
    @tool(idempotent=True)
    def lookup(city: str) -> str:
        """The weather in a city."""
        calls("lookup", city)
        return f"sunny in {city}"

    return lookup


def plan(*cities: str) -> LlmResponse:
    return LlmResponse.tool_calls(
        [ToolCall(name="lookup", args={"city": c}, id=f"c{n}") for n, c in enumerate(cities)]
    )


def agent(
    task: str,
    script: list[LlmResponse],
    calls: Calls,
    store: SQLiteEventStore,
    **hooks: Any,
) -> AgentBuilder:
    built = (
        AgentBuilder(task)
        .llm(MockLlmCaller(script))
        .tool(weather_tool(calls))
        .store(store)
        .run_id("r1")
    )
    for place, func in hooks.items():
        getattr(built, place)(func)
    return built


def facts(store: SQLiteEventStore, run_id: str = "r1") -> list[Any]:
    return [e.fact for e in Trace.load(store, run_id).entries()]


def of(store: SQLiteEventStore, kind: type, run_id: str = "r1") -> list[Any]:
    return [x for x in facts(store, run_id) if isinstance(x, kind)]


def sent(engine: AgentEngine, call: int) -> list[dict[str, Any]]:
    """The messages the LLM was sent at call `call` (from 0)."""
    llm = engine.llm
    assert isinstance(llm, MockLlmCaller)
    return llm.calls[call].memory.build_messages()


def replays(store: SQLiteEventStore, calls: Calls, run_id: str = "r1", **hooks: Any) -> None:
    """The run replays identical with its builder (whose tools and hooks are not called), with
    a builder without hooks, and with its recorded definition alone."""
    before = list(calls.seen)

    def bare(task: str) -> AgentBuilder:
        return AgentBuilder(task).llm(MockLlmCaller()).tool(weather_tool(calls))

    def hooked(task: str) -> AgentBuilder:
        made = bare(task)
        for place, func in hooks.items():
            getattr(made, place)(func)
        return made

    assert_replays(store, run_id, hooked)
    assert_replays(store, run_id, bare)
    assert_replays(store, run_id)
    assert calls.seen == before, "a replay called a tool or a hook"


# -- input guards ------------------------------------------------------------------------------


def test_a_refused_task_ends_the_run_before_any_llm_call_and_replays_the_refusal(
    tmp_path: Path,
) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    calls = Calls()

    def guard(given: GuardInput) -> Refuse | None:
        calls("guard", (given.number, given.text, given.step))
        return Refuse("it asks for a password") if "password" in given.text else None

    engine = agent("print the admin password", [], calls, store, input_guard=guard).build()
    with pytest.raises(
        AgentFailed, match="An input guard refused the task: it asks for a password"
    ):
        engine.run()
    assert calls.of("guard") == [(0, "print the admin password", 1)]
    assert isinstance(engine.llm, MockLlmCaller) and engine.llm.call_count() == 0
    assert of(store, f.InputChecked) == [
        f.InputChecked(verdict="refused", reason="it asks for a password")
    ]
    moves = [(t.from_state, t.event, t.to_state) for t in of(store, f.Transitioned)]
    assert moves[-1] == (State.Planning, Event.InputRejected, State.Error)
    assert store.run("r1").status == "failed"
    replays(store, calls, input_guard=guard)


def test_a_replaced_task_is_what_the_llm_reads_and_what_replay_sends(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    calls = Calls()

    async def guard(given: GuardInput) -> Replace | None:  # an async guard
        await asyncio.sleep(0)
        calls("guard", given.text)
        given.messages[0]["content"] = "changed in the guard's copy"  # changes nothing
        return Replace(given.text.replace("Paris", "Lyon")) if "Paris" in given.text else None

    engine = agent(
        "weather in Paris",
        [plan("Lyon"), LlmResponse.final_answer(ANSWER)],
        calls,
        store,
        input_guard=guard,
    ).build()
    assert engine.run() == ANSWER
    assert sent(engine, 0)[0] == {"role": "user", "content": "weather in Lyon"}
    assert engine.memory.task == "weather in Lyon" and engine.memory.checked_messages == 1
    assert calls.of("guard") == ["weather in Paris"]  # once: a message is checked once
    assert of(store, f.InputChecked) == [f.InputChecked(verdict="replaced", text="weather in Lyon")]
    assert of(store, f.RunStarted)[0].task == "weather in Paris"  # the task as it was given
    assert fold(facts(store)) == engine.memory
    replays(store, calls, input_guard=guard)


def test_guards_check_each_message_sent_while_the_run_goes_on(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    calls = Calls()

    def polite(given: GuardInput) -> Replace | None:
        calls("polite", (given.number, given.text))
        return Replace(given.text.replace("now!", "please")) if "now!" in given.text else None

    def secret(given: GuardInput) -> Refuse | None:  # sees what the guard before it left
        calls("secret", (given.number, given.text))
        return Refuse("a secret") if "secret" in given.text else None

    engine = (
        agent(
            "weather in Lyon",
            [plan("Lyon"), LlmResponse.final_answer(ANSWER)],
            calls,
            store,
            input_guard=polite,
        )
        .input_guard(secret)
        .build()
    )
    engine.steer("answer now!")  # taken at the first transition, checked before the first call
    assert engine.run() == ANSWER
    assert calls.of("polite") == [(0, "weather in Lyon"), (1, "answer now!")]
    assert calls.of("secret") == [(0, "weather in Lyon"), (1, "answer please")]
    assert [m["content"] for m in sent(engine, 0)] == ["weather in Lyon", "answer please"]
    assert [x.verdict for x in of(store, f.InputChecked)] == ["allowed", "replaced"]
    assert engine.memory.user_messages == engine.memory.checked_messages == 2
    assert fold(facts(store)) == engine.memory
    replays(store, calls, input_guard=polite)

    refused = SQLiteEventStore(tmp_path / "refused.db")
    engine = agent(
        "weather in Lyon",
        [plan("Lyon"), LlmResponse.final_answer(ANSWER)],
        Calls(),
        refused,
        input_guard=secret,
    ).build()
    engine.steer("and tell me the secret")
    with pytest.raises(
        AgentFailed, match="An input guard refused message 1 sent to the run: a secret"
    ):
        engine.run()
    replays(refused, Calls(), input_guard=secret)


# -- turn hooks --------------------------------------------------------------------------------


def test_a_before_turn_abort_ends_the_run_and_replays_as_the_same_abort(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    calls = Calls()

    def budget(turn: TurnInfo) -> Abort | None:
        calls("before_turn", (turn.step, len(turn.messages)))
        turn.messages.clear()  # a copy: the request is not changed
        return Abort("two turns are enough") if turn.step > 2 else None

    script = [plan("Lyon"), plan("Paris"), LlmResponse.final_answer(ANSWER)]
    engine = agent("weather", script, calls, store, before_turn=budget).build()
    with pytest.raises(AgentFailed, match="The before_turn hook ended the run: two turns"):
        engine.run()
    assert calls.of("before_turn") == [(1, 1), (2, 3), (3, 5)]
    assert calls.of("lookup") == ["Lyon", "Paris"]
    assert isinstance(engine.llm, MockLlmCaller) and engine.llm.call_count() == 2
    assert of(store, f.HookAborted) == [
        f.HookAborted(hook="before_turn", reason="two turns are enough")
    ]
    last = of(store, f.Transitioned)[-1]
    assert (last.from_state, last.event, last.to_state) == ("Planning", "HookAborted", "Error")
    report = replay_run(
        store, "r1", lambda task: AgentBuilder(task).llm(MockLlmCaller()).tool(weather_tool(calls))
    )  # no hooks at all: the abort comes from the log
    assert report.identical, report
    replays(store, calls, before_turn=budget)


def test_an_after_turn_abort_ends_the_run_after_a_step_or_instead_of_an_answer(
    tmp_path: Path,
) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    calls = Calls()

    def check(turn: TurnInfo) -> Abort | None:
        calls("after_turn", (turn.step, turn.answer))
        if turn.answer is not None and "Lyon" in turn.answer:
            return Abort("answers may not name Lyon")
        return None

    script = [plan("Lyon"), LlmResponse.final_answer(ANSWER)]
    engine = agent("weather", script, calls, store, after_turn=check).build()
    with pytest.raises(AgentFailed, match="may not name Lyon"):
        engine.run()
    assert calls.of("after_turn") == [(1, None), (2, ANSWER)]
    assert not of(store, f.FinalAnswerProduced)  # the answer was not accepted
    assert engine.memory.final_answer is None
    replays(store, calls, after_turn=check)

    stopped = SQLiteEventStore(tmp_path / "stopped.db")
    engine = agent(
        "weather",
        list(script),
        Calls(),
        stopped,
        after_turn=lambda turn: Abort("one step only") if turn.answer is None else None,
    ).build()
    with pytest.raises(AgentFailed, match="one step only"):
        engine.run()
    last = of(stopped, f.Transitioned)[-1]
    assert (last.from_state, last.event, last.to_state) == ("Observing", "HookAborted", "Error")
    replays(stopped, Calls())


# -- tool hooks --------------------------------------------------------------------------------


def test_tool_hooks_veto_rewrite_and_change_what_the_llm_reads(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    calls = Calls()

    def before(info: ToolCallInfo) -> Veto | dict[str, Any] | None:
        calls("before", (info.position, dict(info.call.args)))
        info.call.args["city"] = "Nowhere"  # a copy: the call is not changed
        if info.position == 1:
            return Veto("Berlin is off limits")
        return {"city": "LYON"} if info.position == 0 else None

    async def after(info: ToolCallInfo) -> str | None:
        calls("after", (info.position, info.observation, info.success))
        return f"{info.observation} (checked)"

    script = [plan("Lyon", "Berlin", "Rome"), LlmResponse.final_answer(ANSWER)]
    engine = agent(
        "weather", script, calls, store, before_tool_call=before, after_tool_call=after
    ).build()
    assert engine.run() == ANSWER
    assert sorted(calls.of("lookup")) == ["LYON", "Rome"]  # the vetoed call never ran
    assert calls.of("after") == [
        (0, "SUCCESS: sunny in LYON", True),
        (2, "SUCCESS: sunny in Rome", True),
    ]
    tools_said = [m for m in sent(engine, 1) if m["role"] == "tool"]
    assert [m["content"] for m in tools_said] == [
        "SUCCESS: sunny in LYON (checked)",
        "ERROR: ToolVetoed: the call to 'lookup' was refused before it ran: Berlin is off limits",
        "SUCCESS: sunny in Rome (checked)",
    ]
    assert sent(engine, 1)[1]["tool_calls"][0]["arguments"] == {"city": "LYON"}
    assert of(store, f.ToolCallRewritten) == [f.ToolCallRewritten(index=0, args={"city": "LYON"})]
    assert of(store, f.ToolCallVetoed) == [f.ToolCallVetoed(index=1, reason="Berlin is off limits")]
    executed = of(store, f.ToolExecuted)
    assert [x.observation for x in executed] == ["SUCCESS: sunny in LYON", "SUCCESS: sunny in Rome"]
    assert [x.index for x in of(store, f.ObservationRewritten)] == [0, 2]
    assert fold(facts(store)) == engine.memory
    replays(store, calls, before_tool_call=before, after_tool_call=after)
    before_replay = len(calls.seen)
    report = replay_run(  # the tools run again; the hooks' effects still come from the log
        store,
        "r1",
        lambda task: AgentBuilder(task).llm(MockLlmCaller()).tool(weather_tool(calls)),
        execute_tools=True,
    )
    assert report.identical, report
    assert sorted(calls.seen[before_replay:]) == [("lookup", "LYON"), ("lookup", "Rome")]


def test_a_waiting_run_resumed_runs_the_tool_hooks_and_replays_identical(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    calls = Calls()

    def after(info: ToolCallInfo) -> str:
        return f"{info.observation} (after approval)"

    def builder(task: str) -> AgentBuilder:
        return (
            AgentBuilder(task)
            .llm(MockLlmCaller([plan("Lyon"), LlmResponse.final_answer(ANSWER)]))
            .tool(weather_tool(calls))
            .require_approval("lookup")
            .before_tool_call(lambda info: {"city": info.call.args["city"] + "!"})
            .after_tool_call(after)
        )

    engine = builder("weather").store(store).run_id("r1").build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    decide(store, "r1", "approved")
    resumed = resume_run(
        store,
        "r1",
        lambda task: builder(task).llm(MockLlmCaller([LlmResponse.final_answer(ANSWER)])),
    )
    assert resumed == ANSWER
    assert calls.of("lookup") == ["Lyon!"]
    assert [x.observation for x in of(store, f.ObservationRewritten)] == [
        "SUCCESS: sunny in Lyon! (after approval)"
    ]
    assert_replays(store, "r1", builder)
    assert_replays(store, "r1")


def test_a_branch_goes_on_with_the_builders_guard_and_hooks(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    calls = Calls()
    script = [plan("Lyon"), LlmResponse.final_answer(ANSWER)]
    agent("weather in Paris", list(script), calls, store).build().run()  # no guard then
    assert not of(store, f.InputChecked)

    def guard(given: GuardInput) -> Replace:
        return Replace(given.text + " (checked)")

    def builder(task: str) -> AgentBuilder:
        return AgentBuilder(task).llm(MockLlmCaller()).tool(weather_tool(calls)).input_guard(guard)

    branched = branch_run(
        store,
        "r1",
        at=2,
        builder=builder,
        llm=MockLlmCaller(list(script)),
        new_run_id="b1",
    )
    assert branched.status == "done", branched
    assert of(store, f.InputChecked, "b1") == [
        f.InputChecked(verdict="replaced", text="weather in Paris (checked)")
    ]
    assert_replays(store, "b1", builder)
    assert_replays(store, "r1", builder)  # the parent had no guard: replayed as it ran


# -- what is wrong is said -----------------------------------------------------------------------


def test_a_hook_that_returns_something_else_stops_the_run_saying_what_to_return(
    tmp_path: Path,
) -> None:
    store = SQLiteEventStore(tmp_path / "log.db")
    engine = agent(
        "weather", [plan("Lyon")], Calls(), store, before_tool_call=lambda info: "yes"
    ).build()
    with pytest.raises(HandlerCrashed) as caught:
        engine.run()
    message = str(caught.value.__cause__)
    assert "returned 'yes'" in message and "a dict of arguments or Veto(reason)" in message
    assert isinstance(facts(store)[-1], f.RunAborted)  # what was recorded before is kept
    with pytest.raises(BuildError, match="give a function"):
        AgentBuilder("x").after_turn("not a function")  # type: ignore[arg-type]


def test_a_table_without_the_rows_a_guard_needs_is_refused_when_built() -> None:
    table = build_transition_table().without_rows((State.Planning, Event.InputRejected))
    made = AgentBuilder("x").llm(MockLlmCaller()).transitions(table).input_guard(lambda g: None)
    with pytest.raises(BuildError, match=r"no row \(Planning, InputRejected\)"):
        made.build()
    AgentBuilder("x").llm(MockLlmCaller()).transitions(table).build()  # no guard: no need


# -- the log -----------------------------------------------------------------------------------


def test_the_new_facts_round_trip_are_redacted_and_shown(tmp_path: Path) -> None:
    for fact in (
        f.InputChecked(verdict="replaced", text="ü ✓"),
        f.InputChecked(verdict="refused", reason="no"),
        f.HookAborted(hook="after_turn", reason="enough"),
        f.ToolCallVetoed(index=1, reason="off limits"),
        f.ToolCallRewritten(index=0, args={"n": 1e300, "nested": [{"a": None}]}),
        f.ObservationRewritten(index=2, observation="SUCCESS: fine"),
    ):
        payload = f.FACTS.encode(fact)
        assert f.FACTS.decode(payload, fact.kind, f.FACTS.version(fact.kind)) == fact
    db = tmp_path / "log.db"
    store = SQLiteEventStore(db)
    secret = "sk-planted-0042"
    engine = (
        agent(
            "weather",
            [plan("Lyon"), LlmResponse.final_answer(ANSWER)],
            Calls(),
            store,
            input_guard=lambda given: Replace(f"{given.text} with key {secret}"),
            before_tool_call=lambda info: {"city": secret},
            after_tool_call=lambda info: f"seen with {secret}",
        )
        .redact(r"sk-planted-\d+", name="keys")
        .build()
    )
    assert engine.run() == ANSWER
    store.close()
    assert secret.encode() not in b"".join(p.read_bytes() for p in tmp_path.iterdir())
    shown = CliRunner().invoke(cli, ["--db", str(db), "show", "r1"])
    assert shown.exit_code == 0, shown.output
    for line in (
        "InputChecked",
        "replaced by 'weather with key [REDACTED]'",
        'call #0 runs with ({"city": "[REDACTED]"})',
        "call #0 -> seen with [REDACTED]",
    ):
        assert line in shown.output
    assert_replays(  # the same redaction, no hooks: their effects come from the log
        db,
        "r1",
        lambda task: (
            AgentBuilder(task)
            .llm(MockLlmCaller())
            .tool(weather_tool(Calls()))
            .redact(r"sk-planted-\d+", name="keys")
        ),
    )


# -- generated runs ------------------------------------------------------------------------------


def _verdict(*parts: Any) -> int:
    """A verdict from what a hook sees, the same each time it sees the same (0, 1 or 2)."""
    return sum(map(ord, repr(parts))) % 3


def hooked_agent(task: str) -> AgentBuilder:
    """The sample agent with every kind of guard and hook, each deciding by what it sees."""

    def guard(given: GuardInput) -> Replace | None:
        return Replace(given.text + " (checked)") if _verdict(given.text) else None

    def before_turn(turn: TurnInfo) -> Abort | None:
        return Abort("enough turns") if turn.step >= 4 and _verdict(turn.step) == 0 else None

    def after_turn(turn: TurnInfo) -> Abort | None:
        return Abort("not that answer") if turn.answer and _verdict(turn.answer) == 0 else None

    def before_call(info: ToolCallInfo) -> Veto | dict[str, Any] | None:
        chosen = _verdict(info.call.name, dict(info.call.args))
        if chosen == 0:
            return Veto("not now")
        return {**info.call.args, "checked": True} if chosen == 1 else None

    def after_call(info: ToolCallInfo) -> str | None:
        return None if info.success else f"{info.observation} (the hook saw it fail)"

    return (
        sample_agent(task)
        .input_guard(guard)
        .before_turn(before_turn)
        .after_turn(after_turn)
        .before_tool_call(before_call)
        .after_tool_call(after_call)
    )


@settings(max_examples=25, derandomize=True, deadline=None)
@given(agent_runs(builder=hooked_agent))
def test_generated_runs_with_guards_and_hooks_keep_every_invariant_and_replay(
    run: AgentRun,
) -> None:
    run.assert_invariants()  # the table's rows, ownership, the fold, and replay identical
