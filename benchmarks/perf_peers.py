"""The peers of `benchmarks/perf.py` (see its docstring), each measured only where its package
is installed: the `eventsourcing` library's aggregate loop, and LangGraph with its SQLite
checkpointer, on the workload of perf.py.

    pip install eventsourcing langgraph langgraph-checkpoint-sqlite

Neither is a dependency of agentsm.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import inspect
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any

from perf import Timing, db_bytes, fresh

try:
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate, event
except ImportError:  # measured only where it is installed
    Aggregate = None

if Aggregate is not None:

    class AgentRun(Aggregate):
        """A run as an eventsourcing aggregate: 3 events a step (plan, tool result,
        observation), as small as agentsm's floor writes them, and the answer."""

        @event("Started")
        def __init__(self, task: str) -> None:
            self.task = task
            self.history: list[dict[str, Any]] = []
            self.answer: str | None = None

        @event("Planned")
        def plan(self, tool: str, args: dict[str, Any], call_id: str) -> None:
            self.history.append({"tool": tool, "args": args, "id": call_id})

        @event("ToolReturned")
        def returned(self, call_id: str, observation: str, success: bool) -> None:
            self.history[-1]["observation"] = observation

        @event("Observed")
        def observed(self, step: int, entries: int) -> None:
            self.history[-1]["step"] = step

        @event("Answered")
        def answered(self, answer: str) -> None:
            self.answer = answer


def missing(package: str, *modules: str) -> str | None:
    """None when every module imports, else what to install."""
    for name in modules:
        try:
            found = importlib.util.find_spec(name)
        except ImportError:
            found = None
        if found is None:
            return f"not installed: pip install {package}"
    return None


def version(*packages: str) -> str:
    return ", ".join(f"{p} {importlib.metadata.version(p)}" for p in packages)


# -- eventsourcing --------------------------------------------------------------------------


async def _plan(
    history: list[dict[str, Any]], steps: int
) -> tuple[str, dict[str, Any], str] | None:
    """The LLM of the loop: a call of the tool at each of `steps` steps, then None (answer)."""
    step = len(history) + 1
    return ("step", {"n": step}, f"c{step}") if step <= steps else None


async def _tool(n: int) -> str:
    return str(n)


async def _loop(app: Any, steps: int) -> None:
    """The workload as an eventsourcing loop: the aggregate kept in hand (no repository read),
    saved before each effect as agentsm commits: the plan before the tool runs, the tool result
    and the observation before the next LLM call."""
    run = AgentRun("benchmark")
    app.save(run)
    while (plan := await _plan(run.history, steps)) is not None:
        tool, args, call_id = plan
        run.plan(tool, args, call_id)
        app.save(run)
        observation = await _tool(**args)
        run.returned(call_id, observation, True)
        run.observed(len(run.history), 1)
        app.save(run)
    run.answered("finished after all the steps, as planned")
    app.save(run)


def eventsourcing_step(steps: int, persistence: str, tmp: Path) -> Timing:
    """Time per step of the loop saved through an Application with `persistence` ("popo" or
    "sqlite", a file in `tmp`)."""
    env = {"PERSISTENCE_MODULE": f"eventsourcing.{persistence}"}
    if persistence == "sqlite":
        env["SQLITE_DBNAME"] = fresh(tmp / "eventsourcing.db")
    app = Application(env=env)
    started = Timing.now()
    asyncio.run(_loop(app, steps))
    elapsed = Timing.since(started) / steps
    app.close()
    return elapsed


# -- LangGraph ------------------------------------------------------------------------------


def langgraph_step(steps: int, durability: str, tmp: Path) -> tuple[Timing, int]:
    """Time per step of `langgraph_scale.graph` checkpointed by SqliteSaver into a file (WAL,
    synchronous NORMAL or FULL as `durability` says), each checkpoint saved before the next
    step runs (durability="sync"), and the file's bytes."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph_scale import graph

    path = fresh(tmp / f"langgraph-{durability}.db")
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    app = graph(steps, saver)
    config = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 2 * steps + 10}
    options = (
        {"durability": "sync"} if "durability" in inspect.signature(app.invoke).parameters else {}
    )
    started = Timing.now()
    app.invoke(
        {"messages": [{"role": "user", "content": "benchmark"}], "step": 0}, config, **options
    )
    elapsed = Timing.since(started) / steps
    conn.close()
    return elapsed, db_bytes(path)


if __name__ == "__main__":  # a quick look: python benchmarks/perf_peers.py
    with tempfile.TemporaryDirectory() as where:
        if Aggregate is not None:
            for kind in ("popo", "sqlite"):
                print("eventsourcing", kind, eventsourcing_step(1000, kind, Path(where)))
        if missing("langgraph", "langgraph.checkpoint.sqlite") is None:
            print("LangGraph", langgraph_step(200, "normal", Path(where)))
