"""agentsm against the raw sqlite3 floor, in one run: persisted and engine-only steps, rebuild and
replay, database bytes, concurrency on one event loop, memory as a run grows, time travel.

    python benchmarks/perf.py           # K = 1,000 (engine-only also 10 and 100,000)
    python benchmarks/perf.py --quick   # K = 200, engine-only 10 and 1,000: about a minute

The workload: an LLM (in the process, answering at once unless said otherwise) that calls one
trivial tool per step, K steps, then answers. Each figure is the best of `--repeat` runs, in
wall time and in CPU time (all threads; steadier than wall time on a busy machine).

- persisted: the run recorded into a SQLite file, per step, at durability normal (WAL,
  synchronous NORMAL) and full. Floors: bare sqlite3 writing the very rows agentsm wrote in
  the very same transactions, and bare sqlite3 appending the 3 events a step needs (plan, tool
  result, observation; small JSON rows) in one transaction each.
- engine only: the same run with a store that keeps nothing, with an async and a sync tool.
- rebuild: a 1,000-step run's memory folded from the file; floor: bare sqlite3 reading its rows
  and parsing each payload with json.loads. replay: `replay_run` of it (every fact compared).
- concurrency: N runs at once on one loop, each LLM call taking 20 ms: runs/s and facts/s
  against the ideal (every run's LLM calls back to back, nothing else), and the worst lateness
  of a 10 ms heartbeat on the loop while another process holds the database's write lock (with
  no run at all: what the machine itself adds), in three phases: the first beat (every run
  starts in the same turn of the loop), the rest of the hold, and after the lock is let go
  (the runs catch up on a busy loop).
- memory as a run grows: a run driven by `MockLlmCaller` at two K (2,000 and 20,000; 1,000 and
  3,000 with --quick), each in a fresh process: how much RSS grows with no store and with a
  SQLite file, and Python memory (tracemalloc) with no store, against the size of the run's
  own memory (all it holds), and per step between the two K.
- a big run (20,000 steps; 2,000 with --quick): `Trace.load` and `replay_run`, their times and
  their peak Python memory against the file's size.
- time travel: `replay.moments` over the whole 1,000-step run above and `memory_at` at 100
  random seqs of it (first in the process, then again), against its rebuild.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from agentsm import AgentBuilder, AgentConfig, AgentMemory, LlmResponse, tool
from agentsm.memory import AgentMemory as Memory
from agentsm.tools import ToolRegistry
from eventstore import NewEvent, RunRecord, SQLiteEventStore, StoredEvent
from eventstore.chain import ChainReport
from replay import replay_run


@tool
async def step_async(n: int) -> str:
    """Return its argument."""
    return str(n)


@tool
def step_sync(n: int) -> str:
    """Return its argument (a sync tool: it runs on a thread of its own)."""
    return str(n)


class StepLlm:
    """Calls the tool at each of `steps` steps, then answers; keeps nothing, waits `latency`."""

    def __init__(self, steps: int, tool_name: str, latency: float = 0.0) -> None:
        self.steps, self.tool_name, self.latency = steps, tool_name, latency
        self.answer = LlmResponse.final_answer("finished after all the steps, as planned")

    async def call(self, memory: Memory, tools: ToolRegistry, model: str) -> LlmResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        if memory.step <= self.steps:
            return LlmResponse.tool_call(self.tool_name, {"n": memory.step}, id=f"c{memory.step}")
        return self.answer


def agent(steps: int, store: Any, sync_tool: bool = False, latency: float = 0.0) -> AgentBuilder:
    chosen = step_sync if sync_tool else step_async
    config = AgentConfig(max_steps=steps + 1, reflect_every_n_steps=0)
    return (
        AgentBuilder("benchmark")
        .llm(StepLlm(steps, chosen.name, latency))
        .config(config)
        .tool(chosen)
        .store(store)
    )


class NullStore:
    """A store that keeps nothing: what the engine costs without any I/O."""

    def create_run(self, run_id: str, task: str, **kw: Any) -> RunRecord:
        return RunRecord(run_id, task, "running", 0.0, 0.0, len(kw.get("events", ())))

    def append(self, run_id: str, expected_seq: int, events: Sequence[NewEvent], **kw: Any) -> int:
        return expected_seq + len(events)

    def claim(self, run_id: str, *, force: bool = False) -> None:
        pass

    def release(self, run_id: str) -> None:
        pass

    def read(self, run_id: str, *, after: int = 0, upto: int | None = None) -> list[StoredEvent]:
        return []

    def verify(self, run_id: str) -> ChainReport:
        return ChainReport(run_id, 0, 0, None)

    def batch(self) -> Any:
        raise NotImplementedError

    def run(self, run_id: str) -> RunRecord:
        raise NotImplementedError

    def runs(self) -> list[RunRecord]:
        return []

    def set_status(self, run_id: str, status: str) -> None:
        pass

    def close(self) -> None:
        pass


class CountingStore(SQLiteEventStore):
    """The real store, remembering how many events each transaction wrote."""

    def __init__(self, path: str, **kw: Any) -> None:
        super().__init__(path, **kw)
        self.batches: list[int] = []

    def create_run(self, run_id: str, task: str, **kw: Any) -> RunRecord:
        self.batches.append(len(kw.get("events", ())))
        return super().create_run(run_id, task, **kw)

    def append(self, run_id: str, expected_seq: int, events: Sequence[NewEvent], **kw: Any) -> int:
        self.batches.append(len(events))
        return super().append(run_id, expected_seq, events, **kw)

    async def append_async(
        self, run_id: str, expected_seq: int, events: Sequence[NewEvent], **kw: Any
    ) -> int:
        self.batches.append(len(events))
        return await super().append_async(run_id, expected_seq, events, **kw)


def fresh(path: Path) -> str:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return str(path)


class Timing(NamedTuple):
    """Seconds of wall time and of CPU time (every thread of the process)."""

    wall: float
    cpu: float

    def __truediv__(self, n: float) -> Timing:
        return Timing(self.wall / n, self.cpu / n)

    @classmethod
    def since(cls, started: Timing) -> Timing:
        return cls(time.perf_counter() - started.wall, time.process_time() - started.cpu)

    @classmethod
    def now(cls) -> Timing:
        return cls(time.perf_counter(), time.process_time())


def best(runs: int, measure: Callable[..., Timing], *args: Any) -> Timing:
    """The least wall time and the least CPU time of `runs` measures, each started with the
    garbage of the measures before collected (a 100,000-step run leaves a lot of it, whose
    collection would otherwise fall inside the next measure)."""
    timings = []
    for _ in range(runs):
        gc.collect()
        timings.append(measure(*args))
    return Timing(min(t.wall for t in timings), min(t.cpu for t in timings))


# -- persisted -----------------------------------------------------------------------------


def persisted(steps: int, durability: str, tmp: Path) -> tuple[Timing, CountingStore, str]:
    """Time per step of a recorded run, its store and run id."""
    store = CountingStore(fresh(tmp / f"agentsm-{durability}.db"), durability=durability)
    engine = agent(steps, store).build()
    started = Timing.now()
    engine.run()
    return Timing.since(started) / steps, store, engine.run_id


def raw_connection(path: str, durability: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    conn.execute(
        "CREATE TABLE events (run_id TEXT, seq INTEGER, kind TEXT, payload TEXT, meta TEXT, "
        "recorded_at REAL, version INTEGER, hash TEXT, PRIMARY KEY (run_id, seq))"
    )
    conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, last_seq INTEGER, status TEXT)")
    conn.execute("INSERT INTO runs VALUES ('r', 0, 'running')")
    return conn


def raw_same(store: CountingStore, run_id: str, durability: str, tmp: Path) -> Timing:
    """Seconds to write agentsm's rows in agentsm's transactions with bare sqlite3."""
    rows = [
        (e.run_id, e.seq, e.kind, e.payload, json.dumps(e.meta), e.recorded_at, e.version, e.hash)
        for e in store.read(run_id)
    ]
    conn = raw_connection(fresh(tmp / f"raw-same-{durability}.db"), durability)
    at = 0
    started = Timing.now()
    for size in store.batches:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows[at : at + size])
        at += size
        conn.execute("UPDATE runs SET last_seq = ? WHERE run_id = 'r'", (at,))
        conn.execute("COMMIT")
    elapsed = Timing.since(started)
    conn.close()
    return elapsed


def raw_three(steps: int, durability: str, tmp: Path) -> Timing:
    """Seconds for bare sqlite3 to append plan, tool result and observation per step, one
    transaction each."""
    conn = raw_connection(fresh(tmp / f"raw-three-{durability}.db"), durability)
    seq = 0
    started = Timing.now()
    for step in range(1, steps + 1):
        for kind, payload in (
            ("plan", {"tool": "step", "args": {"n": step}, "id": f"c{step}"}),
            ("tool_result", {"id": f"c{step}", "observation": str(step), "success": True}),
            ("observation", {"step": step, "entries": 1}),
        ):
            seq += 1
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO events VALUES ('r', ?, ?, ?, '{}', ?, 1, NULL)",
                (seq, kind, json.dumps(payload), time.time()),
            )
            conn.execute("UPDATE runs SET last_seq = ? WHERE run_id = 'r'", (seq,))
            conn.execute("COMMIT")
    elapsed = Timing.since(started)
    conn.close()
    return elapsed


def db_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = (
        conn.execute("PRAGMA page_count").fetchone()[0]
        * conn.execute("PRAGMA page_size").fetchone()[0]
    )
    conn.close()
    return int(size)


# -- engine only, rebuild, replay ---------------------------------------------------------


def engine_only(steps: int, sync_tool: bool) -> Timing:
    engine = agent(steps, NullStore(), sync_tool=sync_tool).build()
    started = Timing.now()
    engine.run()
    return Timing.since(started) / steps


def raw_fold(path: str) -> Timing:
    started = Timing.now()
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT kind, payload, meta FROM events ORDER BY run_id, seq").fetchall()
    parsed = [(k, json.loads(p), json.loads(m)) for k, p, m in rows]
    conn.close()
    assert parsed
    return Timing.since(started)


def rebuild(path: str, run_id: str) -> Timing:
    started = Timing.now()
    AgentMemory.rebuild(SQLiteEventStore(path, read_only=True), run_id)
    return Timing.since(started)


def replay(path: str, run_id: str) -> Timing:
    started = Timing.now()
    report = replay_run(path, run_id)
    assert report.identical, str(report)
    return Timing.since(started)


# -- concurrency ----------------------------------------------------------------------------


def concurrent_runs(runs: int, steps: int, latency: float, tmp: Path) -> dict[str, float]:
    store = SQLiteEventStore(fresh(tmp / "concurrent.db"))
    engines = [agent(steps, store, latency=latency).build() for _ in range(runs)]
    before = store.transactions

    async def main() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(e.arun() for e in engines))
        return time.perf_counter() - started

    elapsed = asyncio.run(main())
    facts = sum(e.seq for e in engines)
    ideal = (steps + 1) * latency  # every LLM call back to back, all runs at once
    return {
        "elapsed": elapsed,
        "ideal": ideal,
        "facts": facts,
        "transactions": store.transactions - before,
        "commits": runs * (2 * steps + 3),  # create (and claim), 2 per step, answer, stop
    }


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


class Stalls(NamedTuple):
    """The worst lateness (seconds) of a 10 ms heartbeat in each phase of `heartbeat_stall`."""

    starting: float  # the first beat: every run starts in the same turn of the loop
    held: float  # the rest of the time the other process holds the lock
    after: float  # after it let go, until the runs end (they catch up: the loop is busy)


def heartbeat_stall(runs: int, steps: int, hold: float, tmp: Path) -> tuple[Stalls, int]:
    """The worst lateness of a 10 ms heartbeat on the loop while another process holds the
    write lock for `hold` seconds and `runs` runs record on the same loop (0: the machine's own
    noise), in each phase (`Stalls`), and how many facts the runs recorded."""
    path = fresh(tmp / "stall.db")
    store = SQLiteEventStore(path)
    store.create_run("warm", "opens the file and its WAL")
    engines = [agent(steps, store, latency=0.002).build() for _ in range(runs)]
    hold_until = time.perf_counter() + hold
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path, str(hold)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

    async def main() -> Stalls:
        worst = [0.0, 0.0, 0.0]
        work = asyncio.gather(*(e.arun() for e in engines))
        loop = asyncio.get_running_loop()
        phase = 0
        while not work.done() or time.perf_counter() < hold_until:
            due = loop.time() + 0.010
            await asyncio.sleep(0.010)
            worst[phase] = max(worst[phase], loop.time() - due)
            phase = 1 if time.perf_counter() < hold_until else 2
        await work
        return Stalls(*worst)

    stalls = asyncio.run(main())
    holder.wait(timeout=60)
    return stalls, sum(e.seq for e in engines)


# -- report -------------------------------------------------------------------------------


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def both(t: Timing, unit: Callable[[float], str] = us) -> str:
    return f"{unit(t.wall)} ({unit(t.cpu)} CPU)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller K, no 100,000-step runs")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept")
    args = parser.parse_args()
    k = 200 if args.quick else 1000
    engine_ks = [10, 1000] if args.quick else [10, 1000, 100_000]
    runs = args.repeat
    print(f"agentsm performance, K = {k:,} steps (one tool call each), best of {runs}")
    print(
        f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory() as where:
        tmp = Path(where)
        print("\n| persisted, per step | normal (WAL, synchronous NORMAL) | full |")
        print("|---|---:|---:|")
        figures: dict[str, dict[str, Timing]] = {}
        kept: dict[str, tuple[CountingStore, str]] = {}
        for durability in ("normal", "full"):
            results = [persisted(k, durability, tmp) for _ in range(runs)]
            _, store, run_id = min(results, key=lambda r: r[0].wall)
            seconds = Timing(min(r[0].wall for r in results), min(r[0].cpu for r in results))
            kept[durability] = (store, run_id)
            figures[durability] = {
                "agentsm": seconds,
                "same": best(runs, raw_same, store, run_id, durability, tmp) / k,
                "three": best(runs, raw_three, k, durability, tmp) / k,
            }
        n, f = figures["normal"], figures["full"]
        store, run_id = kept["normal"]
        facts = store.run(run_id).last_seq
        print(f"| agentsm | {both(n['agentsm'])} | {both(f['agentsm'])} |")
        print(
            f"| raw sqlite3, same rows and transactions | {both(n['same'])} | {both(f['same'])} |"
        )
        print(
            f"| raw sqlite3, 3 events per step, 1 transaction each | {both(n['three'])} "
            f"| {both(f['three'])} |"
        )
        print(
            f"| agentsm / 3-events floor (wall) | {n['agentsm'].wall / n['three'].wall:.1f}x "
            f"| {f['agentsm'].wall / f['three'].wall:.1f}x |"
        )
        print(
            f"\nfacts per step {facts / k:.1f}, transactions per step "
            f"{len(store.batches) / k:.2f}, database bytes per step "
            f"{db_bytes(store.path) / k:,.0f}"
        )

        print("\n| engine only (a store that keeps nothing), per step | async tool | sync tool |")
        print("|---|---:|---:|")
        for steps in engine_ks:
            repeat = 1 if steps >= 100_000 else runs
            a = best(repeat, engine_only, steps, False)
            s = best(repeat, engine_only, steps, True)
            print(f"| K = {steps:,} | {both(a)} | {both(s)} |")

        base = tmp / "rebuild.db"
        engine = agent(1000, SQLiteEventStore(fresh(base))).build()
        engine.run()
        path, run_id = str(base), engine.run_id
        print("\n| a 1,000-step run | time |")
        print("|---|---:|")
        print(f"| rebuild memory from the file | {both(best(runs, rebuild, path, run_id), ms)} |")
        fold_floor = best(runs, raw_fold, path)
        print(f"| raw sqlite3: read the rows, json.loads each | {both(fold_floor, ms)} |")
        print(f"| replay (every fact compared) | {both(best(1, replay, path, run_id), ms)} |")

        many, steps, latency = 200, 5, 0.020
        c = concurrent_runs(many, steps, latency, tmp)
        ideal_runs = many / c["ideal"]
        print(
            f"\n| {many} concurrent runs on one loop, {steps} steps each, LLM {ms(latency)} "
            "| measured | ideal |"
        )
        print("|---|---:|---:|")
        print(f"| wall time | {ms(c['elapsed'])} | {ms(c['ideal'])} |")
        print(f"| runs/s | {many / c['elapsed']:,.0f} | {ideal_runs:,.0f} |")
        print(f"| facts/s | {c['facts'] / c['elapsed']:,.0f} | {c['facts'] / c['ideal']:,.0f} |")
        print(
            f"| transactions (group commit) | {c['transactions']:,.0f} "
            f"| {c['commits']:,.0f} writes asked |"
        )
        hold = 1.0
        print(
            f"\n| runs on the loop; another process holds the write lock {hold:g} s "
            "| worst stall of a 10 ms heartbeat: as the runs start | while the lock is held "
            "| after it is let go | facts recorded |"
        )
        print("|---:|---:|---:|---:|---:|")
        for n_runs in (0, 1, many):
            trials = [heartbeat_stall(n_runs, steps, hold, tmp) for _ in range(runs)]
            worst = [max(t[0][i] for t in trials) for i in range(3)]
            shown = " | ".join(ms(x) for x in worst)
            print(f"| {n_runs} | {shown} | {trials[0][1]:,} |")

        from perf_memory import report  # it imports this module: not at the top

        report(args.quick, runs, tmp, path, run_id)


if __name__ == "__main__":
    main()
