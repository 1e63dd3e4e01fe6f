"""What reading a run back costs: the reducer per fact, rebuild, replay, time travel, bytes.

    python benchmarks/fold.py                 # K = 1,000 steps
    python benchmarks/fold.py --steps 1000 --big 20000

Each figure is the best of `--repeat` runs, in CPU time of this process (`time.process_time`),
so that other work on a busy machine does not count. The run is the one of `benchmarks/engine.py`: a
mock LLM calling a trivial tool every step, then answering. `--big K` also records a K-step
run and reports the peak Python memory (tracemalloc) of loading its Trace and of replaying it,
against the size of its file. `measure_fold(steps, path)` is importable by other benchmarks.
"""

from __future__ import annotations

import argparse
import gc
import os
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

from agentsm import AgentBuilder, AgentConfig, AgentMemory, LlmResponse, MockLlmCaller, tool
from agentsm import facts as f
from agentsm.memory import apply, initial_memory
from agentsm.trace import Trace
from agentsm.types import AgentConfig as Config
from agentsm.types import HistoryEntry, ToolCall
from eventstore import SQLiteEventStore
from replay import memory_at, replay_run

__all__ = ["apply_cost", "measure_fold", "record_run"]


@tool
async def noop(n: int) -> str:
    """Return its argument."""
    return str(n)


def record_run(steps: int, path: str) -> str:
    """Record a `steps`-step run (one tool call per step, then an answer) into `path`."""
    script = [LlmResponse.tool_call("noop", {"n": i}) for i in range(steps)]
    script.append(LlmResponse.final_answer("finished after all the steps, as planned"))
    config = AgentConfig(max_steps=steps + 1, reflect_every_n_steps=0)
    store = SQLiteEventStore(path)
    builder = AgentBuilder("benchmark").llm(MockLlmCaller(script)).config(config).tool(noop)
    engine = builder.store(store).build()
    engine.run()
    store.close()
    return engine.run_id


def _step_facts(step: int) -> list[Any]:
    """The facts the reducer sees in one plan-act-observe step (as the engine records them)."""
    call = ToolCall(name="noop", args={"n": step}, id=f"call_{step}")
    entry = HistoryEntry(step=step, tool=call, observation=f"SUCCESS: {step}", success=True)
    return [
        f.StepStarted(step=step),
        f.LlmResponded(purpose="plan", response=LlmResponse(calls=(call,))),
        f.ToolCallsPlanned(calls=(call,), parallel=False),
        f.ToolCallStarted(index=0),
        f.ToolExecuted(index=0, observation=f"SUCCESS: {step}", success=True),
        f.ObservationCommitted(entries=(entry,)),
    ]


def apply_cost(at_step: int, window: int = 200) -> float:
    """Microseconds per fact for the reducer, measured over `window` steps from `at_step`."""
    start = f.RunStarted(task="t", task_type="default", system_prompt="", config=Config(), tools=())
    memory = initial_memory(start)
    for step in range(1, at_step + 1):
        for fact in _step_facts(step):
            memory = apply(memory, fact)
    facts = [x for s in range(at_step + 1, at_step + window + 1) for x in _step_facts(s)]
    began = time.process_time()
    for fact in facts:
        memory = apply(memory, fact)
    return (time.process_time() - began) * 1e6 / len(facts)


def _best(repeat: int, work: Callable[[], object]) -> float:
    """Milliseconds of the fastest of `repeat` runs of `work`."""
    times = []
    for _ in range(repeat):
        gc.collect()
        began = time.process_time()
        work()
        times.append(time.process_time() - began)
    return min(times) * 1000


def _file_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    return int(pages * size)


def _walk(path: str, run_id: str) -> Iterator[Any]:
    """Every seq's memory of the run, in one pass (`replay.moments`)."""
    import replay

    walk = getattr(replay, "moments", None)
    if walk is not None:
        yield from walk(path, run_id)
        return
    last = SQLiteEventStore(path, create=False, read_only=True).run(run_id).last_seq
    for seq in range(1, last + 1, max(1, last // 50)):  # before it: sampled, a walk takes minutes
        yield memory_at(path, run_id, seq)


def measure_fold(steps: int, path: str, repeat: int = 3) -> dict[str, float]:
    """Rebuild, Trace load, replay and time-travel figures of a `steps`-step run at `path`
    (recorded there first); milliseconds, and bytes per step."""
    run_id = record_run(steps, path)
    store = SQLiteEventStore(path, create=False, read_only=True)
    facts = store.run(run_id).last_seq
    result: dict[str, float] = {"steps": steps, "facts": facts}
    result["bytes_per_step"] = _file_bytes(path) / steps
    result["rebuild_ms"] = _best(repeat, lambda: AgentMemory.rebuild(store, run_id))
    result["trace_ms"] = _best(repeat, lambda: Trace.load(store, run_id))
    result["replay_ms"] = _best(repeat, lambda: replay_run(path, run_id))
    report = replay_run(path, run_id)
    assert report.identical, str(report)
    began = time.process_time()
    visited = sum(1 for _ in _walk(path, run_id))
    result["walk_ms_per_seq"] = (time.process_time() - began) * 1000 / visited
    result["memory_at_last_ms"] = _best(repeat, lambda: memory_at(path, run_id, facts))
    store.close()
    return result


def _peak_mb(work: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    work()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def measure_big(steps: int, path: str) -> dict[str, float]:
    """Peak memory of loading and replaying a `steps`-step run, against its file size."""
    run_id = record_run(steps, path)
    size = _file_bytes(path) / 1e6
    store = SQLiteEventStore(path, create=False, read_only=True)
    trace = _peak_mb(lambda: Trace.load(store, run_id))
    began = time.process_time()
    replayed = _peak_mb(lambda: replay_run(path, run_id))
    seconds = time.process_time() - began
    store.close()
    return {
        "file_mb": size,
        "trace_peak_mb": trace,
        "replay_peak_mb": replayed,
        "replay_s": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big", type=int, default=0, help="also measure memory at this K")
    args = parser.parse_args()
    for at in (1000, 20000):
        print(f"reducer at step {at:>6}: {apply_cost(at):.2f} us/fact")
    with tempfile.TemporaryDirectory() as tmp:
        r = measure_fold(args.steps, os.path.join(tmp, "fold.db"), args.repeat)
        print(f"K={args.steps}: {int(r['facts'])} facts, {r['bytes_per_step']:.0f} bytes/step")
        for key in ("rebuild_ms", "trace_ms", "replay_ms", "memory_at_last_ms"):
            print(f"  {key:<18} {r[key]:9.1f}")
        print(f"  {'walk_ms_per_seq':<18} {r['walk_ms_per_seq']:9.3f}")
        if args.big:
            b = measure_big(args.big, os.path.join(tmp, "big.db"))
            print(
                f"K={args.big}: file {b['file_mb']:.1f} MB, Trace peak {b['trace_peak_mb']:.0f} MB"
                f", replay peak {b['replay_peak_mb']:.0f} MB ({b['replay_s']:.1f} s traced)"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
