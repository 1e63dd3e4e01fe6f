"""A sync tool that says it returns at once (`@tool(fast=True)`) is called on the event loop's
thread, without the hop to a worker thread, and is recorded, fails and replays like any tool."""

from __future__ import annotations

import threading

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller, tool
from eventstore import SQLiteEventStore
from replay import replay_run

from .scenarios import LONG

THREADS: list[str] = []


@tool(fast=True, idempotent=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    THREADS.append(threading.current_thread().name)
    return a + b


@tool(fast=True)
def broken(a: int) -> int:
    """Fail."""
    raise ValueError(f"no {a}")


@tool(fast=True)
async def waits(a: int) -> int:
    """An async tool: fast does not apply."""
    return a


def test_a_fast_tool_runs_on_the_loops_thread_and_replays_identical() -> None:
    THREADS.clear()
    store = SQLiteEventStore()
    script = [
        LlmResponse.tool_call("add", {"a": 2, "b": 3}),
        LlmResponse.tool_call("broken", {"a": 7}),
        LlmResponse.final_answer(LONG),
    ]
    builder = AgentBuilder("add").llm(MockLlmCaller(script)).tool(add).tool(broken)
    engine = builder.config(AgentConfig(reflect_every_n_steps=0)).store(store).build()
    caller = threading.current_thread().name
    assert engine.run() == LONG
    assert THREADS == [caller]  # not a worker thread
    history = engine.memory.history
    assert [h.observation for h in history] == ["SUCCESS: 5", "ERROR: ValueError: no 7"]
    assert [h.success for h in history] == [True, False]
    assert replay_run(store, engine.run_id).identical


def test_a_fast_tool_says_so_and_an_async_one_is_not_made_fast() -> None:
    assert add.fast and repr(add) == "<Tool 'add' idempotent fast>"
    assert not waits.fast and waits.is_async
