"""Tools that misbehave (hang past their timeout, raise their own TimeoutError or
CancelledError, call sys.exit, raise KeyboardInterrupt) and runs stopped from outside: each
leaves the run recorded, resumable, and never waits on an abandoned call."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    EngineBusy,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    State,
    ToolCall,
    ToolContext,
    ToolFinished,
    ToolRegistry,
    tool,
)
from agentsm import facts as f
from eventstore import SQLiteEventStore
from replay import replay_run

ANSWER = "All done: the work was carried out as asked."


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test, so that no tool thread outlives it for long."""
    event = threading.Event()
    yield event
    event.set()


def agent(store: Any, *responses: LlmResponse, tool_timeout: float | None = None) -> AgentBuilder:
    script = [*responses, LlmResponse.final_answer(ANSWER)]
    config = AgentConfig(tool_timeout=tool_timeout, reflect_every_n_steps=0)
    return AgentBuilder("pay the invoice").llm(MockLlmCaller(script)).config(config).store(store)


def kinds(engine: Any) -> list[str]:
    return [e.event for e in engine.trace()]


def observations(engine: Any) -> list[str]:
    return [h.observation for h in engine.memory.history]


# -- timeouts ---------------------------------------------------------------------------------


def test_a_sync_tool_past_its_timeout_is_abandoned_and_its_outcome_is_unknown(
    release: threading.Event,
) -> None:
    finished = threading.Event()

    @tool(timeout=0.05)
    def pay(amount: int) -> str:
        release.wait(10)
        finished.set()
        return "paid"

    store = SQLiteEventStore()
    engine = agent(store, LlmResponse.tool_call("pay", {"amount": 5}, id="p1")).tool(pay).build()
    with pytest.raises(HumanInputRequired) as info:
        engine.run()
    assert not finished.is_set()  # run() came back while the abandoned call still ran
    assert engine.current_state() == State.WaitingForHuman
    assert "ToolExecuted" not in kinds(engine)
    asked = [x for x in engine.trace().facts() if isinstance(x, f.ApprovalRequested)]
    assert [(a.call_ids, a.reason) for a in asked] == [(("p1",), "outcome_unknown")]
    assert "timed out" in info.value.requests[0].reason
    assert store.run(engine.run_id).status == "waiting"

    # the same path as a crash: a human says it did not take effect, and the run goes on
    resumed = agent(store).tool(pay).on_approval(lambda request: False).attach(engine.run_id)
    assert resumed.run() == ANSWER
    assert "ERROR: OutcomeUnknown" in observations(resumed)[0]


def test_an_async_tool_past_its_timeout_is_abandoned_too() -> None:
    @tool(timeout=0.05)
    async def pay(amount: int) -> str:
        await asyncio.sleep(30)
        return "paid"

    engine = agent(SQLiteEventStore(), LlmResponse.tool_call("pay", {"amount": 5})).tool(pay)
    with pytest.raises(HumanInputRequired):
        engine.build().run()


def test_an_idempotent_tool_past_its_timeout_fails_and_the_llm_reads_it(
    release: threading.Event,
) -> None:
    @tool(timeout=0.05, idempotent=True)
    def balance() -> str:
        release.wait(10)
        return "100"

    outputs: list[Any] = []
    engine = agent(SQLiteEventStore(), LlmResponse.tool_call("balance")).tool(balance).build()

    async def consume() -> None:
        async for output in engine.stream():
            outputs.append(output)

    asyncio.run(consume())
    assert engine.memory.final_answer == ANSWER
    expected = "ERROR: TimeoutError: tool 'balance' did not finish in 0.05s and was abandoned"
    assert observations(engine) == [expected]
    assert [o.observation for o in outputs if isinstance(o, ToolFinished)] == [expected]


def test_a_tools_own_timeout_error_is_its_own_failure() -> None:
    @tool
    def fetch(url: str) -> str:
        raise TimeoutError("upstream took too long")

    engine = agent(SQLiteEventStore(), LlmResponse.tool_call("fetch", {"url": "x"}))
    built = engine.tool(fetch).build()
    assert built.run() == ANSWER
    assert observations(built) == ["ERROR: TimeoutError: upstream took too long"]


def test_a_timed_out_call_stops_the_sequence_and_the_rest_runs_after_approval(
    release: threading.Event,
) -> None:
    ran: list[str] = []

    @tool(timeout=1)  # the hanging first attempt is abandoned; the re-run must fit in it
    def slow(n: int) -> str:
        if not ran:
            ran.append("slow")
            release.wait(10)
        return "slow done"

    @tool
    def fast(n: int) -> str:
        ran.append("fast")
        return "fast done"

    calls = LlmResponse.tool_calls(
        [
            LlmResponse.tool_call("slow", {"n": 1}).calls[0],
            LlmResponse.tool_call("fast", {"n": 2}).calls[0],
        ]
    )
    store = SQLiteEventStore()
    builder = agent(store, calls).config(AgentConfig(parallel_tools=False, reflect_every_n_steps=0))
    engine = builder.tool(slow).tool(fast).build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    assert ran == ["slow"]  # the second call waits for the human's word on the first
    resumed = agent(store).tool(slow).tool(fast).on_approval(lambda r: True)
    done = resumed.attach(engine.run_id)
    assert done.run() == ANSWER
    assert observations(done) == ["SUCCESS: slow done", "SUCCESS: fast done"]


# -- sys.exit, KeyboardInterrupt, CancelledError ----------------------------------------------


def test_sys_exit_in_a_tool_stops_the_run_recorded_and_resumable() -> None:
    @tool
    def quit_now(code: int) -> str:
        sys.exit(code)

    store = SQLiteEventStore()
    engine = agent(store, LlmResponse.tool_call("quit_now", {"code": 3})).tool(quit_now).build()
    with pytest.raises(SystemExit) as info:
        engine.run()
    assert info.value.code == 3
    assert store.run(engine.run_id).status == "stopped"
    assert engine.memory.in_flight == ()
    assert "SystemExit" in (engine.memory.last_observation or "")

    resumed = agent(store).tool(quit_now).attach(engine.run_id)
    assert resumed.run() == ANSWER
    assert "which stopped the run" in observations(resumed)[0]


def test_keyboard_interrupt_in_an_async_tool_stops_the_run_recorded_and_resumable() -> None:
    @tool
    async def ask() -> str:
        raise KeyboardInterrupt

    store = SQLiteEventStore()
    engine = agent(store, LlmResponse.tool_call("ask")).tool(ask).build()
    with pytest.raises(KeyboardInterrupt):
        engine.run()
    assert store.run(engine.run_id).status == "stopped"
    assert kinds(engine)[-2:] == ["ToolCallStarted", "ToolExecuted"]
    assert agent(store).tool(ask).attach(engine.run_id).run() == ANSWER


@pytest.mark.parametrize("is_async", [True, False])
def test_a_tools_own_cancelled_error_is_a_failure_not_a_cancellation(is_async: bool) -> None:
    async def cancelled_async() -> str:
        raise asyncio.CancelledError("the upstream stream was cancelled")

    def cancelled_sync() -> str:
        raise asyncio.CancelledError("the upstream stream was cancelled")

    func = cancelled_async if is_async else cancelled_sync
    engine = agent(SQLiteEventStore(), LlmResponse.tool_call("cancelled"))
    built = engine.tool(tool(name="cancelled")(func)).build()
    assert built.run() == ANSWER
    assert observations(built) == ["ERROR: CancelledError: the upstream stream was cancelled"]


def test_a_run_cancelled_during_a_tool_is_stopped_with_the_call_in_flight(
    release: threading.Event,
) -> None:
    started = threading.Event()
    ran: list[int] = []

    @tool
    def work(n: int) -> str:
        ran.append(n)
        started.set()
        release.wait(10)
        return "worked"

    calls = LlmResponse.tool_calls(
        [LlmResponse.tool_call("work", {"n": i}, id=f"w{i}").calls[0] for i in (1, 2)]
    )
    store = SQLiteEventStore()
    builder = agent(store, calls).config(AgentConfig(parallel_tools=False))
    engine = builder.tool(work).build()

    async def main() -> None:
        task = asyncio.ensure_future(engine.arun())
        await asyncio.to_thread(started.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert ran == [1]
    assert store.run(engine.run_id).status == "stopped"
    assert engine.memory.in_flight == ("w1",)
    assert engine.current_state() == State.Acting

    resumed = agent(store).tool(work).on_approval(lambda r: False).attach(engine.run_id)
    release.set()
    assert resumed.run() == ANSWER
    assert ran == [1, 2]


# -- the tool context -------------------------------------------------------------------------


def test_a_tool_gets_its_context_and_a_key_stable_across_a_re_run(
    release: threading.Event,
) -> None:
    seen: list[ToolContext] = []

    @tool(timeout=1)  # the hanging first attempt is abandoned; the others must fit in it
    def pay(amount: int, ctx: ToolContext) -> str:
        seen.append(ctx)
        if len(seen) == 1:
            release.wait(10)  # the first attempt hangs and is abandoned
        return f"paid {amount}"

    assert list(pay.schema["properties"]) == ["amount"]  # the LLM never sees the context
    same_id = [LlmResponse.tool_call("pay", {"amount": n}, id="call_0") for n in (5, 7)]
    store = SQLiteEventStore()
    engine = agent(store, *same_id).tool(pay).build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    again = agent(store, same_id[1]).tool(pay).on_approval(lambda r: True)
    resumed = again.attach(engine.run_id)
    assert resumed.run() == ANSWER
    assert [(c.run_id, c.call_id, c.tool) for c in seen] == [(engine.run_id, "call_0", "pay")] * 3
    first, again, second = (c.idempotency_key for c in seen)
    assert first == again  # the approved re-run of the same planned call: the same key
    assert second != first  # another call, though the LLM reused its id
    assert ToolContext.current() is None


def test_a_tool_run_outside_an_engine_gets_a_fresh_key() -> None:
    keys: list[str] = []

    @tool
    def note(ctx: ToolContext) -> str:
        keys.append(ctx.idempotency_key)
        return "ok"

    registry = ToolRegistry()
    registry.add(note)
    registry.execute("note", {})
    registry.execute("note", {})
    assert len(set(keys)) == 2


# -- the sync and async doors -----------------------------------------------------------------


def test_ctrl_c_in_run_inside_a_running_loop_stops_the_run(release: threading.Event) -> None:
    ran: list[int] = []

    @tool
    def work(n: int) -> str:
        ran.append(n)
        if n == 1:  # Ctrl-C in a notebook: SIGINT to the thread that runs the cell
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            release.wait(10)
        return "worked"

    calls = LlmResponse.tool_calls(
        [LlmResponse.tool_call("work", {"n": i}, id=f"w{i}").calls[0] for i in (1, 2)]
    )
    store = SQLiteEventStore()
    builder = agent(store, calls).config(AgentConfig(parallel_tools=False))
    engine = builder.tool(work).build()

    async def cell() -> str:
        return engine.run()  # run() blocks the notebook's running loop, as in Jupyter

    loop = asyncio.new_event_loop()  # no SIGINT handler of its own, like a kernel's loop
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
    finally:
        loop.close()
    assert ran == [1]  # the run stopped at once: the second call never ran
    assert store.run(engine.run_id).status == "stopped"
    assert engine.memory.in_flight == ("w1",)
    resumed = agent(store).tool(work).on_approval(lambda r: False).attach(engine.run_id)
    release.set()
    assert resumed.run() == ANSWER


TENANT: ContextVar[str] = ContextVar("tenant", default="none")


@pytest.mark.parametrize("is_async", [True, False])
def test_context_variables_reach_tools_from_run_inside_a_running_loop(is_async: bool) -> None:
    seen: list[str] = []

    async def whoami_async() -> str:
        seen.append(TENANT.get())
        return "ok"

    def whoami_sync() -> str:
        seen.append(TENANT.get())
        return "ok"

    func = whoami_async if is_async else whoami_sync
    builder = agent(SQLiteEventStore(), LlmResponse.tool_call("whoami"))
    engine = builder.tool(tool(name="whoami")(func)).build()

    async def cell() -> str:
        TENANT.set("acme")
        return engine.run()

    assert asyncio.run(cell()) == ANSWER
    assert seen == ["acme"]


def test_one_engine_driven_twice_at_once_is_refused() -> None:
    entered, gate = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        entered.set()
        await gate.wait()
        return "held"

    engine = agent(SQLiteEventStore(), LlmResponse.tool_call("hold")).tool(hold).build()

    async def main() -> str:
        first = asyncio.ensure_future(engine.arun())
        await entered.wait()
        with pytest.raises(EngineBusy, match="already driving run"):
            await engine.arun()
        gate.set()
        return await first

    assert asyncio.run(main()) == ANSWER
    facts = engine.trace().facts()
    assert isinstance(facts[-1], f.RunFinished)
    assert sum(isinstance(x, f.ToolCallStarted) for x in facts) == 1


def test_a_parallel_batch_with_a_timed_out_call_keeps_the_others_and_replays_identical(
    release: threading.Event,
) -> None:
    @tool(timeout=0.05)
    def slow(n: int) -> str:
        release.wait(10)
        return "slow done"

    @tool
    def fast(n: int) -> str:
        return "fast done"

    calls = LlmResponse.tool_calls(
        [ToolCall(name="slow", args={"n": 1}, id="s"), ToolCall(name="fast", args={"n": 2}, id="f")]
    )
    store = SQLiteEventStore()

    def builder(task: str = "") -> AgentBuilder:
        agent_ = agent(store).config(AgentConfig(parallel_tools=True, reflect_every_n_steps=0))
        return agent_.tool(slow).tool(fast).on_approval(lambda r: False)

    engine = builder().llm(MockLlmCaller([calls, LlmResponse.final_answer(ANSWER)])).build()
    assert engine.run() == ANSWER
    first, second = observations(engine)
    assert first.startswith("ERROR: OutcomeUnknown") and second == "SUCCESS: fast done"
    assert replay_run(store, engine.run_id).identical
    assert replay_run(store, engine.run_id, builder).identical


@pytest.mark.parametrize("parallel", [False, True])
def test_one_call_object_planned_twice_gets_two_positions_and_two_keys(parallel: bool) -> None:
    seen: list[ToolContext] = []

    @tool
    def pay(amount: int, ctx: ToolContext) -> str:
        seen.append(ctx)
        return f"paid {amount}"

    call = LlmResponse.tool_call("pay", {"amount": 5}, id="c").calls[0]
    twice = LlmResponse(calls=(call, call))  # the very same object, as a caller may return
    store = SQLiteEventStore()
    engine = agent(store, twice).config(AgentConfig(parallel_tools=parallel)).tool(pay).build()
    assert engine.run() == ANSWER
    assert sorted(c.position for c in seen) == [0, 1]  # as the reducer placed them
    assert len({c.idempotency_key for c in seen}) == 2  # two planned calls: two payments
