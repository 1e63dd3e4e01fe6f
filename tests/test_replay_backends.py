"""The engine and the replay tools on each backend, given the log's path or URL: a run recorded
and rebuilt, replayed identical, branched, resumed after its process died, and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import closing
from typing import Any

import pytest

from agentsm import AgentBuilder, AgentMemory, LlmResponse, State
from agentsm.trace import Trace
from eventstore import open_store
from replay import replay_run
from replay.branching import branch_run
from replay.diffing import diff_runs
from replay.resuming import resume_run
from replay.timetravel import memory_at

from .scenarios import LONG, SCENARIOS, base


def test_a_run_is_recorded_and_its_memory_rebuilt_from_the_log(db_url: str) -> None:
    engine = SCENARIOS["blacklist"]().store(db_url).build()
    engine.run()
    with closing(open_store(db_url, create=False)) as store:
        memory, state = AgentMemory.rebuild(store, engine.run_id)
        assert (memory, state) == (engine.memory, engine.current_state())
        record = store.run(engine.run_id)
        assert record.status == "done" and record.driver is None and store.verify(record.run_id).ok
    last = len(engine.trace())
    assert memory_at(db_url, engine.run_id, last) == (engine.memory, engine.current_state())
    engine.store.close()


def test_replay_is_identical_and_a_branch_diverges_where_changed(db_url: str) -> None:
    engine = SCENARIOS["blacklist"]().store(db_url).build()
    engine.run()
    engine.store.close()
    run_id = engine.run_id
    report = replay_run(db_url, run_id, lambda task: SCENARIOS["blacklist"]())
    assert report.identical, str(report)
    with closing(open_store(db_url, create=False)) as store:
        trace = Trace.load(store, run_id)
        refused = next(e for e in trace if e.event == "ToolsRejected")
        new_id = branch_run(
            store,
            run_id,
            at=refused.seq,
            llm_response=LlmResponse.final_answer("Changed my mind: " + LONG),
        ).run_id
        child = store.run(new_id)
        assert (child.parent_id, child.status) == (run_id, "done")
        memory, state = AgentMemory.rebuild(store, new_id)
        assert state == State.Done and memory.final_answer == "Changed my mind: " + LONG
        assert diff_runs(store, run_id, new_id).divergence is not None
    assert replay_run(db_url, new_id).identical  # a branch replays too, from the URL


class ProcessDied(BaseException):
    """Stands for the process being killed during an LLM call."""


def test_a_run_that_died_resumes_from_the_url_and_replays_identical(db_url: str) -> None:
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

    engine = agent("dies").store(db_url).run_id("r").build()
    with pytest.raises(ProcessDied):
        engine.run()
    engine.store.release("r")  # the dead process's claim ends with it
    engine.store.close()
    assert resume_run(db_url, "r", agent) == LONG
    with closing(open_store(db_url, create=False)) as store:
        kinds = [e.kind for e in store.read("r")]
        assert kinds.count("LlmRequested") == 3 and store.run("r").status == "done"
    report = replay_run(db_url, "r", agent)
    assert report.identical, str(report)


def test_the_command_line_reads_the_log_at_the_url(db_url: str) -> None:
    engine = SCENARIOS["blacklist"]().store(db_url).build()
    engine.run()
    engine.store.close()
    env = {**os.environ, "AGENTSM_DB": db_url}
    done = subprocess.run(
        [sys.executable, "-m", "replay", "verify", "--all"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"run {engine.run_id}: intact" in done.stdout
    exported = subprocess.run(
        [sys.executable, "-m", "replay", "--db", db_url, "export", engine.run_id[:6]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout.splitlines()[0])["run_id"] == engine.run_id
