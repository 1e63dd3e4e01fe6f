"""Commits only where the log needs them: one before each effect (LLM call, tool call, human
callback) and one at each stop, so at most two transactions per plan-act step; a process killed
between two effects loses only facts that a resume recomputes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder, AgentConfig, AgentMemory, LlmResponse, State, tool
from eventstore import SQLiteEventStore
from replay import assert_replays
from replay.resuming import resume_run

ROOT = Path(__file__).resolve().parent.parent


class LookupLlm:
    """Looks up three keys, one per step, then answers with what it read: every decision comes
    from memory alone, so a resumed run decides as the first process would have."""

    def __init__(self, store: SQLiteEventStore | None = None) -> None:
        self.store = store
        self.committed_at_call: list[str] = []

    async def call(self, memory: AgentMemory, tools: Any, model: str) -> LlmResponse:
        if self.store is not None:
            self.committed_at_call.append(last_committed(self.store))
        seen = [e.observation for e in memory.history]
        if len(seen) < 3:
            name = next(iter(tools.names()))
            return LlmResponse.tool_call(name, {"key": f"k{len(seen)}"}, id=f"c{len(seen)}")
        return LlmResponse.final_answer("Read: " + ", ".join(seen))


@tool(idempotent=True)
def lookup(key: str) -> str:
    """Read a key (idempotent: safe to run again)."""
    return f"value of {key}"


def lookup_agent(task: str = "look three keys up", *, llm: Any = None, tool: Any = lookup) -> Any:
    return (
        AgentBuilder(task)
        .llm(llm or LookupLlm())
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(tool)
    )


def last_committed(store: SQLiteEventStore) -> str:
    """The kind of the last fact another reader of the file sees."""
    with SQLiteEventStore(store.path, read_only=True) as reader:
        return reader.read("run")[-1].kind


def transactions(db: Path, steps: int) -> int:
    """Write transactions (BEGIN IMMEDIATE) of a run of `steps` tool steps and an answer."""
    store = SQLiteEventStore(db)
    begun: list[str] = []
    store._conn.set_trace_callback(lambda sql: begun.append(sql) if sql == "BEGIN IMMEDIATE" else 0)

    class Steps:
        async def call(self, memory: AgentMemory, tools: Any, model: str) -> LlmResponse:
            if memory.step <= steps:
                return LlmResponse.tool_call("lookup", {"key": str(memory.step)})
            return LlmResponse.final_answer("done after every step, as planned")

    agent = lookup_agent(llm=Steps()).store(store)
    agent.config(AgentConfig(reflect_every_n_steps=0, max_steps=steps + 1))
    assert agent.build().run() == "done after every step, as planned"
    store.close()
    return len(begun)


def test_a_plan_act_step_costs_two_transactions(tmp_path: Path) -> None:
    short, long = transactions(tmp_path / "short.db", 3), transactions(tmp_path / "long.db", 9)
    assert long - short == 2 * 6  # one before the LLM call, one before the tool call
    # the creation, which claims the run; the answer's LLM call; the stop, which releases it
    assert short == 2 * 3 + 3


def test_each_effect_starts_after_what_precedes_it_is_committed(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "runs.db")
    seen_by_tool: list[str] = []
    seen_by_human: list[str] = []

    @tool(idempotent=True)
    def watched(key: str) -> str:
        """Read a key."""
        seen_by_tool.append(last_committed(store))
        return f"value of {key}"

    def approve(request: Any) -> bool:
        with SQLiteEventStore(store.path, read_only=True) as reader:
            seen_by_human.append(",".join(e.kind for e in reader.read("run")))
        return True

    llm = LookupLlm(store)
    agent = lookup_agent(llm=llm, tool=watched).store(store).run_id("run")
    engine = agent.require_approval("watched").on_approval(approve).build()
    assert engine.run().startswith("Read: SUCCESS: value of k0")
    assert llm.committed_at_call == ["LlmRequested"] * 4
    assert seen_by_tool == ["ToolCallStarted"] * 3
    assert len(seen_by_human) == 3
    assert all(",ApprovalRequested,Transitioned" in kinds for kinds in seen_by_human)


KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from test_commits import lookup_agent
engine = lookup_agent().store({db!r}).run_id("run").build()
def kill(seq, state, fact, memory):
    if fact.kind == {kind!r} and memory.step == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # no exception, no cleanup: the process is gone
engine.observe(kill)
print(engine.run())
"""


@pytest.mark.parametrize(
    "kind", ["LlmResponded", "ToolCallsPlanned", "ToolExecuted", "ObservationCommitted"]
)
def test_a_process_killed_between_effects_resumes_to_the_same_result(
    kind: str, tmp_path: Path
) -> None:
    whole = lookup_agent().store(tmp_path / "whole.db").build()
    expected = whole.run()
    db = tmp_path / "killed.db"
    script = KILL_SCRIPT.format(tests=str(ROOT / "tests"), db=str(db), kind=kind)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = SQLiteEventStore(db)
    kept = [e.kind for e in store.read("run")]
    assert kept[-1] in ("LlmRequested", "ToolCallStarted")  # the last commit preceded an effect
    assert kind not in kept[kept.index("StepStarted", kept.index("StepStarted") + 1) :]
    assert resume_run(db, "run", lookup_agent) == expected
    memory, state = AgentMemory.rebuild(store, "run")
    assert state == State.Done and memory.final_answer == expected
    assert [e.observation for e in memory.history] == [e.observation for e in whole.memory.history]
    assert_replays(db, "run", lookup_agent)  # the kill and the resume replay identical
