"""The memory and time-travel sections of `benchmarks/perf.py` (see its docstring), which
prints them after its own: memory as a run grows, a big run's Trace and replay, time travel.

`python benchmarks/perf_memory.py --grow K none|PATH traced|rss` is one growth measure, in
the fresh process perf.py starts for it, printed as JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import tracemalloc
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from perf import NullStore, Timing, agent, best, both, db_bytes, fresh, ms, step_async

from agentsm import AgentBuilder, AgentConfig, AgentMemory, LlmResponse, MockLlmCaller
from agentsm.engine import AgentEngine
from agentsm.memory import AgentMemory as Memory
from agentsm.tools import ToolRegistry
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import memory_at, moments, replay_run, timetravel

ANSWER = LlmResponse.final_answer("finished after all the steps, as planned")


def plan(memory: Memory, tools: ToolRegistry, model: str) -> LlmResponse:
    """The script's step: a call of the tool made afresh, as a provider's response would be."""
    return LlmResponse.tool_call(step_async.name, {"n": memory.step}, id=f"c{memory.step}")


def scripted(steps: int, store: Any) -> tuple[AgentEngine, MockLlmCaller]:
    """A `steps`-step run driven by `MockLlmCaller` (one script item per step) and its mock."""
    mock = MockLlmCaller([plan] * steps + [ANSWER])
    config = AgentConfig(max_steps=steps + 1, reflect_every_n_steps=0)
    builder = AgentBuilder("benchmark").llm(mock).config(config).tool(step_async)
    return builder.store(store).build(), mock


def rss() -> tuple[int, int]:
    """Bytes of this process's resident memory now and at its largest so far (Linux; elsewhere
    both are the largest, which a child process may inherit from its parent)."""
    try:
        with open("/proc/self/status") as status:
            found = dict(line.split(":", 1) for line in status if line.startswith("Vm"))
        return int(found["VmRSS"].split()[0]) * 1024, int(found["VmHWM"].split()[0]) * 1024
    except (OSError, KeyError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = peak if sys.platform == "darwin" else peak * 1024
        return peak, peak


def deep_size(root: object) -> int:
    """Bytes of `root` and of every object it reaches (classes, modules and functions left
    out), each counted once: the size of a memory with everything it holds."""
    shared = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    seen: set[int] = set()
    todo, total = [root], 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, shared):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


# -- memory as a run grows ------------------------------------------------------------------


def grow(steps: int, where: str, traced: bool) -> dict[str, float]:
    """Run `steps` steps (into the SQLite file `where`, or no store for "none") and say what
    the process grew by: its RSS (peak, and held after the run) or, `traced`, its Python
    memory (tracemalloc: peak and held), and the size of the run's memory at its end."""
    store = NullStore() if where == "none" else SQLiteEventStore(where)
    engine, mock = scripted(steps, store)
    gc.collect()
    before, _ = rss()
    if traced:
        tracemalloc.start()
    engine.run()
    gc.collect()
    if traced:
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    else:
        now, largest = rss()
        held, peak = now - before, max(now, largest) - before
    return {
        "held": held,
        "peak": peak,
        "memory": deep_size(engine.memory),
        "kept_calls": len(mock.calls),
        "calls": mock.call_count(),
    }


def grown(steps: int, where: str, traced: bool) -> dict[str, float]:
    """`grow` in a fresh process (so that no earlier measure's memory is counted)."""
    mode = "traced" if traced else "rss"
    argv = [sys.executable, __file__, "--grow", str(steps), where, mode]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout)
    return result


def mb(n: float) -> str:
    """Bytes as megabytes (10^6)."""
    return f"{n / 1e6:,.1f} MB"


WAYS = (("none", False), ("none", True), ("sqlite", False))
"""The growth measures: (store, traced)."""


def growth_table(sizes: tuple[int, int], tmp: Path) -> None:
    """Print how memory grows with K: RSS with no store and with a SQLite file, and Python
    memory (tracemalloc, slow: with no store only) against the run's memory's own size."""
    small, large = sizes
    asked = [(where, traced, k) for where, traced in WAYS for k in sizes]

    def one(job: tuple[str, bool, int]) -> dict[str, float]:
        where, traced, k = job
        return grown(k, where if where == "none" else fresh(tmp / f"grow-{k}.db"), traced)

    with ThreadPoolExecutor(max_workers=2) as pool:  # memory, not time: two at once is fair
        got = dict(zip(asked, pool.map(one, asked), strict=True))
    (a, b), (ta, tb), (sa, sb) = ([got[w, t, k] for k in sizes] for w, t in WAYS)
    per_step = large - small

    def row(label: str, at_small: float, at_large: float) -> None:
        growth = (at_large - at_small) / per_step
        print(f"| {label} | {mb(at_small)} | {mb(at_large)} | {growth:,.0f} B |")

    print(
        f"\n| a run of K steps (MockLlmCaller), memory | K = {small:,} | K = {large:,} | per step |"
    )
    print("|---|---:|---:|---:|")
    row("the run's memory (its own size, all it holds)", a["memory"], b["memory"])
    row("no store: RSS growth, peak", a["peak"], b["peak"])
    row("no store: Python memory (tracemalloc), peak", ta["peak"], tb["peak"])
    row(
        "no store: Python memory held after the run, beyond the run's memory",
        ta["held"] - ta["memory"],
        tb["held"] - tb["memory"],
    )
    row("SQLite file: RSS growth, peak", sa["peak"], sb["peak"])
    print(
        f"\nMockLlmCaller kept {b['kept_calls']:,.0f} of its {b['calls']:,.0f} calls "
        "(the last `keep`, 1,000 by default)"
    )


# -- a big run: Trace and replay ------------------------------------------------------------


def peak_of(work: Callable[[], object]) -> float:
    """Peak bytes of Python memory (tracemalloc) that `work` allocated."""
    gc.collect()
    tracemalloc.start()
    try:
        work()
        return float(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def big_table(steps: int, tmp: Path) -> None:
    """Print the times and peak memory of `Trace.load` and `replay_run` of a `steps`-step run."""
    path = fresh(tmp / "big.db")
    engine = agent(steps, SQLiteEventStore(path)).build()
    engine.run()
    run_id = engine.run_id
    size = db_bytes(path)
    store = SQLiteEventStore(path, create=False, read_only=True)

    def load() -> Trace:
        return Trace.load(store, run_id)

    def replayed() -> None:
        report = replay_run(path, run_id)
        assert report.identical, str(report)

    print(
        f"\n| a {steps:,}-step run ({store.run(run_id).last_seq:,} facts, file {mb(size)}) "
        "| time | peak Python memory | / file size |"
    )
    print("|---|---:|---:|---:|")
    for label, work in (("Trace.load", load), ("replay_run (every fact compared)", replayed)):
        seconds = best(1, _timed, work)
        peak = peak_of(work)
        print(f"| {label} | {both(seconds, ms)} | {mb(peak)} | {peak / size:.1f}x |")
    store.close()


def _timed(work: Callable[[], object]) -> Timing:
    """How long `work` took."""
    started = Timing.now()
    work()
    return Timing.since(started)


# -- time travel ----------------------------------------------------------------------------


def forget() -> None:
    """Drop the memories `memory_at` and `moments` keep in this process (a cold start)."""
    timetravel._cache.clear()


def time_travel_table(path: str, run_id: str, runs: int, visits: int = 100) -> None:
    """Print `moments` over the whole run and `memory_at` at `visits` random seqs (cold, then
    warm) against `AgentMemory.rebuild`."""
    store = SQLiteEventStore(path, create=False, read_only=True)
    last = store.run(run_id).last_seq
    seqs = random.Random(11).sample(range(1, last + 1), min(visits, last))

    def rebuild() -> Timing:
        started = Timing.now()
        AgentMemory.rebuild(store, run_id)
        return Timing.since(started)

    def walk() -> Timing:
        forget()
        started = Timing.now()
        seen = sum(1 for _ in moments(path, run_id))
        assert seen == last, (seen, last)
        return Timing.since(started)

    def visit() -> Timing:
        started = Timing.now()
        for seq in seqs:
            memory_at(path, run_id, seq)
        return Timing.since(started)

    def cold() -> Timing:
        forget()
        return visit()

    def warm() -> Timing:
        return visit()

    once = best(runs, rebuild)
    print(f"\n| time travel in a run of {last:,} facts | time | per seq | / rebuild (CPU) |")
    print("|---|---:|---:|---:|")
    print(f"| rebuild memory from the file (for scale) | {both(once, ms)} | | 1.0x |")
    for label, measure, count in (
        ("moments: every seq's memory, one pass", walk, last),
        (f"memory_at at {len(seqs)} random seqs, first time in the process", cold, len(seqs)),
        (f"memory_at at the same {len(seqs)} seqs again", warm, len(seqs)),
    ):
        t = best(runs, measure)
        print(f"| {label} | {both(t, ms)} | {both(t / count)} | {t.cpu / once.cpu:.1f}x |")
    store.close()
    forget()


def report(quick: bool, runs: int, tmp: Path, path: str, run_id: str) -> None:
    """Print the three tables: growth, a big run, time travel (on the run at `path`)."""
    growth_table((1_000, 3_000) if quick else (2_000, 20_000), tmp)
    big_table(2_000 if quick else 20_000, tmp)
    time_travel_table(path, run_id, runs)


def main() -> None:
    """One growth measure, as JSON (what `grown` runs in a fresh process)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grow", nargs=3, metavar=("K", "WHERE", "MODE"), required=True)
    steps, where, mode = parser.parse_args().grow
    print(json.dumps(grow(int(steps), where, mode == "traced")))


if __name__ == "__main__":
    main()
