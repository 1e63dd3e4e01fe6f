"""agentsm against bare sqlite3 and against its peers, in one run: persisted and engine-only
steps, the log's rows and bytes in both log formats, rebuild and replay, concurrency on one
event loop, memory as a run grows, time travel, and a summary of the ratios against their goals.

    python benchmarks/perf.py           # K = 1,000 (engine-only also 10 and 100,000)
    python benchmarks/perf.py --quick   # K = 200, engine-only 10 and 1,000: about a minute

The workload: an LLM (in the process, answering at once unless said otherwise) that calls one
trivial tool per step, K steps, then answers. Each figure is the best of `--repeat` runs, in
wall time and in CPU time (all threads; steadier than wall time on a busy machine).

- persisted: the run recorded into a SQLite file, per step, in log format 1 (a row per fact)
  and log format 2 (facts packed into few, narrow rows), at durability normal (WAL,
  synchronous NORMAL) and full. Floors: bare sqlite3 writing the very facts agentsm wrote, a
  row each, in the very same transactions, and bare sqlite3 appending the 3 events a step
  needs (plan, tool result, observation; small JSON rows) in one transaction each. The log's
  rows and bytes per step: the pages of its tables and indexes (SQLite's `dbstat`, where the
  sqlite3 module has it) and the whole file, against the floor's.
- engine only: the same run with a store that keeps nothing, with an async and a sync tool,
  and with `SQLiteEventStore(":memory:")` (the store tests use).
- peers, each measured only where its package is installed (neither is a dependency of
  agentsm: `pip install eventsourcing langgraph langgraph-checkpoint-sqlite`): the
  `eventsourcing` library's loop (an Aggregate with the 3 events a step, saved through its
  Application before each effect, in memory (POPO) and in SQLite), against agentsm's engine
  only; LangGraph with SqliteSaver (the graph of `langgraph_scale.py`: an LLM node and a tool
  node looping K times, each checkpoint saved before the next step), against agentsm
  persisted. See `perf_peers.py`.
- rebuild: a 1,000-step run's memory folded from the file, in each log format; floor: bare
  sqlite3 reading its rows and parsing each payload with json.loads (format 1: payload and
  envelope of each row; format 2: the `facts` rows' payload, and their `more` where not NULL).
  replay: `replay_run` of it (every fact compared).
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
- goals: each ratio a user weighs, its goal, and whether it is met (in wall time and in CPU
  time).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
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


FORMATS = (1, 2) if "log_format" in inspect.signature(SQLiteEventStore).parameters else (1,)
"""The log formats this build's SQLite store writes."""


def in_format(log_format: int | None) -> dict[str, Any]:
    """The store's keyword arguments for a log of `log_format` (None: the build's default)."""
    return {} if log_format is None or FORMATS == (1,) else {"log_format": log_format}


def default_format() -> int:
    """The format a new log is created in."""
    store = SQLiteEventStore(":memory:")
    found = int(getattr(store, "log_format", 1))
    store.close()
    return found


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


def persisted(
    steps: int, durability: str, log_format: int, tmp: Path
) -> tuple[Timing, CountingStore, str]:
    """Time per step of a recorded run, its store and run id."""
    path = fresh(tmp / f"agentsm-{log_format}-{durability}.db")
    store = CountingStore(path, durability=durability, **in_format(log_format))
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
    """The file's bytes once its WAL is checkpointed (page count x page size)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = (
        conn.execute("PRAGMA page_count").fetchone()[0]
        * conn.execute("PRAGMA page_size").fetchone()[0]
    )
    conn.close()
    return int(size)


LOG_TABLES = {1: ("events",), 2: ("facts", "names")}
"""The tables that hold a log's facts, by format (the floor's are format 1's)."""


class LogSize(NamedTuple):
    """A log's rows of facts, the bytes of the pages of those tables and their indexes
    (`dbstat`; None where the sqlite3 module lacks it), and the whole file's bytes."""

    rows: int
    pages: int | None
    file: int


def log_size(path: str, log_format: int) -> LogSize:
    file = db_bytes(path)  # checkpoints the WAL first
    tables = LOG_TABLES[log_format]
    conn = sqlite3.connect(path)
    rows = conn.execute(f"SELECT count(*) FROM {tables[0]}").fetchone()[0]
    marks = ", ".join("?" * len(tables))
    try:
        pages = conn.execute(
            "SELECT coalesce(sum(d.pgsize), 0) FROM dbstat d JOIN sqlite_schema s "
            f"ON s.name = d.name WHERE s.tbl_name IN ({marks})",
            tables,
        ).fetchone()[0]
    except sqlite3.OperationalError:  # no dbstat in this build of SQLite
        pages = None
    conn.close()
    return LogSize(int(rows), None if pages is None else int(pages), file)


# -- engine only, rebuild, replay ---------------------------------------------------------


def engine_only(steps: int, sync_tool: bool, in_memory: bool = False) -> Timing:
    """Time per step with a store that keeps nothing, or with `SQLiteEventStore(":memory:")`."""
    store = SQLiteEventStore(":memory:") if in_memory else NullStore()
    engine = agent(steps, store, sync_tool=sync_tool).build()
    started = Timing.now()
    engine.run()
    elapsed = Timing.since(started) / steps
    store.close()
    return elapsed


def raw_fold(path: str, log_format: int = 1) -> Timing:
    """Bare sqlite3 reading a log's rows in order and parsing their JSON: format 1's payload
    and envelope of each row, format 2's payload of each row and its riders (`more`)."""
    started = Timing.now()
    conn = sqlite3.connect(path)
    if log_format == 1:
        rows = conn.execute("SELECT kind, payload, meta FROM events ORDER BY run_id, seq")
        parsed = [(k, json.loads(p), json.loads(m)) for k, p, m in rows.fetchall()]
    else:
        rows = conn.execute("SELECT kind, payload, more FROM facts ORDER BY run, seq")
        parsed = [
            (k, json.loads(p), None if m is None else json.loads(m)) for k, p, m in rows.fetchall()
        ]
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
    store = SQLiteEventStore(fresh(tmp / "concurrent.db"))  # the default format
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


def ratio(a: Timing, b: Timing) -> Timing:
    """a / b, in wall time and in CPU time."""
    return Timing(a.wall / b.wall, a.cpu / b.cpu)


def times(r: Timing) -> str:
    return f"{r.wall:.1f}x ({r.cpu:.1f}x CPU)"


def per_step(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


class Goal(NamedTuple):
    """A ratio a user weighs, its goal and whether it is met."""

    what: str
    measured: str
    goal: str
    met: str


def judged(what: str, value: Timing, limit: float, goal: str, shown: str) -> Goal:
    """A goal of `value` at most `limit` (at least, for a negative limit), judged in wall
    time and in CPU time."""
    ok = [v <= limit if limit > 0 else v >= -limit for v in value]
    met = "yes" if all(ok) else "no" if not any(ok) else "in CPU time" if ok[1] else "in wall time"
    return Goal(what, shown, goal, met)


def unmeasured(what: str, why: str, goal: str) -> Goal:
    return Goal(what, why, goal, "not measured")


class Persisted(NamedTuple):
    """A persisted run's time per step, its store and run id."""

    seconds: Timing
    store: CountingStore
    run_id: str


def persisted_best(runs: int, steps: int, durability: str, log_format: int, tmp: Path) -> Persisted:
    """The least wall and CPU time per step of `runs` recorded runs; the store of the fastest
    is kept (the others closed)."""
    results = []
    for _ in range(runs):
        gc.collect()
        results.append(persisted(steps, durability, log_format, tmp))
    kept = min(results, key=lambda r: r[0].wall)
    for r in results:
        if r is not kept:
            r[1].close()
    return Persisted(
        Timing(min(r[0].wall for r in results), min(r[0].cpu for r in results)), kept[1], kept[2]
    )


DURABILITY_SHOWN = {
    "normal": "normal (WAL, synchronous NORMAL)",
    "full": "full (WAL, synchronous FULL)",
}


def persisted_section(
    k: int, runs: int, tmp: Path, goals: list[Goal]
) -> dict[tuple[int, str], Persisted]:
    """The persisted step in each format and durability against the floors, and the log's
    rows and bytes per step."""
    found: dict[tuple[int, str], Persisted] = {}
    same: dict[str, Timing] = {}
    three: dict[str, Timing] = {}
    for durability in ("normal", "full"):
        for log_format in FORMATS:
            found[log_format, durability] = persisted_best(runs, k, durability, log_format, tmp)
        model = found[FORMATS[0], durability]
        same[durability] = best(runs, raw_same, model.store, model.run_id, durability, tmp) / k
        three[durability] = best(runs, raw_three, k, durability, tmp) / k
    print(
        "\n| persisted, per step | agentsm | raw sqlite3: the same facts, a row each, in the "
        "same transactions | raw sqlite3: 3 events a step, 1 transaction each | agentsm / "
        "3 events |"
    )
    print("|---|---:|---:|---:|---:|")
    for (log_format, durability), p in found.items():
        r = ratio(p.seconds, three[durability])
        print(
            f"| log format {log_format}, {DURABILITY_SHOWN[durability]} | {both(p.seconds)} "
            f"| {both(same[durability])} | {both(three[durability])} | {times(r)} |"
        )
        goals.append(
            judged(
                f"a persisted step, log format {log_format}, {durability} durability, against "
                "bare sqlite3 appending 3 events a step",
                r,
                2.0,
                "at most 2x",
                times(r),
            )
        )

    floor = log_size(str(tmp / "raw-three-normal.db"), 1)
    sizes = {f: log_size(found[f, "normal"].store.path, f) for f in FORMATS}
    stores = {f: found[f, "normal"] for f in FORMATS}
    print(
        f"\n| the log of a {k:,}-step run, per step | "
        + " | ".join(f"log format {f}" for f in FORMATS)
        + " | raw sqlite3, 3 events a step |"
    )
    print("|---|" + "---:|" * (len(FORMATS) + 1))
    facts = [p.store.run(p.run_id).last_seq / k for p in stores.values()]
    batches = [len(p.store.batches) / k for p in stores.values()]
    print("| facts | " + " | ".join(f"{x:.1f}" for x in facts) + " | 3.0 |")
    print(
        "| rows | "
        + " | ".join(f"{s.rows / k:.1f}" for s in sizes.values())
        + f" | {floor.rows / k:.1f} |"
    )
    print("| transactions | " + " | ".join(f"{x:.2f}" for x in batches) + " | 3.00 |")
    if floor.pages is not None:
        shown = " | ".join(f"{(s.pages or 0) / k:,.0f}" for s in sizes.values())
        print(
            f"| bytes: pages of the facts' tables and indexes (dbstat) | {shown} "
            f"| {floor.pages / k:,.0f} |"
        )
        shown = " | ".join(f"{(s.pages or 0) / floor.pages:.1f}x" for s in sizes.values())
        print(f"| bytes (dbstat) / raw sqlite3 | {shown} | 1.0x |")
    shown = " | ".join(f"{s.file / k:,.0f}" for s in sizes.values())
    print(
        f"| bytes: the whole file (page count x page size) / K | {shown} | {floor.file / k:,.0f} |"
    )
    for f, s in sizes.items():
        counted, how = (
            (s.pages, "pages of its tables and indexes")
            if s.pages is not None
            else (s.file, "the whole file")
        )
        goals.append(
            judged(
                f"bytes a step, log format {f} ({how}, K = {k:,})",
                Timing(counted / k, counted / k),
                1024,
                "at most 1 KB (1,024 bytes)",
                f"{counted / k:,.0f} bytes",
            )
        )
    if 2 not in FORMATS:
        goals.append(
            unmeasured(
                "bytes a step, log format 2",
                "this build writes log format 1 only",
                "at most 1 KB (1,024 bytes)",
            )
        )
    return found


def engine_section(
    engine_ks: list[int], runs: int, memory_format: int, goals: list[Goal]
) -> dict[int, Timing]:
    """The engine with a store that keeps nothing (async and sync tool) and with a store in
    memory; returns the async figures with no store, by K."""
    print(
        "\n| engine only, per step | async tool, a store that keeps nothing | sync tool, a store "
        'that keeps nothing | async tool, SQLiteEventStore(":memory:") '
        f"(log format {memory_format}) |"
    )
    print("|---|---:|---:|---:|")
    found: dict[int, Timing] = {}
    for steps in engine_ks:
        repeat = 1 if steps >= 100_000 else runs
        a = found[steps] = best(repeat, engine_only, steps, False)
        s = best(repeat, engine_only, steps, True)
        m = (
            "not measured (time)"
            if steps >= 100_000
            else both(best(repeat, engine_only, steps, False, True))
        )
        print(f"| K = {steps:,} | {both(a)} | {both(s)} | {m} |")
    a = found[1000]
    goals.append(
        judged(
            "an engine-only step (async tool, a store that keeps nothing, K = 1,000)",
            a,
            100e-6,
            "at most 100 us",
            both(a),
        )
    )
    return found


def eventsourcing_section(
    k: int,
    runs: int,
    tmp: Path,
    engine: Timing,
    found: dict[tuple[int, str], Persisted],
    goals: list[Goal],
) -> None:
    """The eventsourcing library's loop against agentsm's engine only (and persisted)."""
    import perf_peers

    what = (
        "an engine-only step (async tool, K = 1,000) against the eventsourcing loop in memory "
        "(POPO)"
    )
    why = perf_peers.missing("eventsourcing", "eventsourcing")
    if why is not None:
        print(f"\neventsourcing: {why}")
        goals.append(unmeasured(what, why, "at most 1.25x"))
        return
    popo = best(runs, perf_peers.eventsourcing_step, 1000, "popo", tmp)
    on_file = best(runs, perf_peers.eventsourcing_step, k, "sqlite", tmp)
    mine = found[FORMATS[-1], "full"].seconds
    print(
        f"\n| the same workload in {perf_peers.version('eventsourcing')}: an Aggregate, 3 events "
        "a step, saved through its Application before each effect, per step | time | agentsm "
        "/ it |"
    )
    print("|---|---:|---:|")
    r = ratio(engine, popo)
    print(
        f"| POPO (in memory), K = 1,000; against agentsm's engine only | {both(popo)} "
        f"| {times(r)} |"
    )
    print(
        f"| SQLite (WAL, synchronous FULL, as it opens a file), K = {k:,}; against agentsm "
        f"persisted, log format {FORMATS[-1]}, full | {both(on_file)} "
        f"| {times(ratio(mine, on_file))} |"
    )
    goals.append(judged(what, r, 1.25, "at most 1.25x", times(r)))


def langgraph_section(
    k: int, runs: int, tmp: Path, found: dict[tuple[int, str], Persisted], goals: list[Goal]
) -> None:
    """LangGraph with SqliteSaver against agentsm persisted, at each durability."""
    import perf_peers

    log_format = FORMATS[-1]
    what = (
        f"a persisted step (log format {log_format}, {{}} durability): how many times faster "
        "than LangGraph with SqliteSaver"
    )
    why = perf_peers.missing(
        "langgraph langgraph-checkpoint-sqlite", "langgraph", "langgraph.checkpoint.sqlite"
    )
    if why is not None:
        print(f"\nLangGraph: {why}")
        for durability in ("normal", "full"):
            goals.append(unmeasured(what.format(durability), why, "at least 15x"))
        return
    print(
        f"\n| the same workload in {perf_peers.version('langgraph', 'langgraph-checkpoint-sqlite')}"
        f" (SqliteSaver, a checkpoint saved before each step runs), K = {k:,}, per step | time "
        f"| file bytes / K | agentsm persisted (log format {log_format}) | LangGraph / agentsm |"
    )
    print("|---|---:|---:|---:|---:|")
    for durability in ("normal", "full"):
        trials = [perf_peers.langgraph_step(k, durability, tmp) for _ in range(runs)]
        theirs = Timing(min(t[0].wall for t in trials), min(t[0].cpu for t in trials))
        mine = found[log_format, durability].seconds
        r = ratio(theirs, mine)
        print(
            f"| {DURABILITY_SHOWN[durability]} | {both(theirs)} | {trials[0][1] / k:,.0f} "
            f"| {both(mine)} | {times(r)} |"
        )
        goals.append(judged(what.format(durability), r, -15.0, "at least 15x", times(r)))


def rebuild_section(runs: int, tmp: Path, goals: list[Goal]) -> dict[int, tuple[str, str]]:
    """Rebuild and replay of a 1,000-step run in each format; returns each run's path and id."""
    made: dict[int, tuple[str, str]] = {}
    rebuilt: dict[int, Timing] = {}
    floors: dict[int, Timing] = {}
    replayed: dict[int, Timing] = {}
    for log_format in FORMATS:
        base = tmp / f"rebuild-{log_format}.db"
        engine = agent(1000, SQLiteEventStore(fresh(base), **in_format(log_format))).build()
        engine.run()
        path, run_id = made[log_format] = str(base), engine.run_id
        rebuilt[log_format] = best(runs, rebuild, path, run_id)
        floors[log_format] = best(runs, raw_fold, path, log_format)
        replayed[log_format] = best(runs, replay, path, run_id)
    print("\n| a 1,000-step run | " + " | ".join(f"log format {f}" for f in FORMATS) + " |")
    print("|---|" + "---:|" * len(FORMATS))
    print(
        "| rebuild memory from the file | "
        + " | ".join(both(rebuilt[f], ms) for f in FORMATS)
        + " |"
    )
    print(
        "| raw sqlite3: read the rows, json.loads each (format 1: payload and envelope; "
        "format 2: payload, and more where not NULL) | "
        + " | ".join(both(floors[f], ms) for f in FORMATS)
        + " |"
    )
    print(
        "| rebuild / raw read | "
        + " | ".join(times(ratio(rebuilt[f], floors[f])) for f in FORMATS)
        + " |"
    )
    print(
        "| replay (every fact compared) | "
        + " | ".join(both(replayed[f], ms) for f in FORMATS)
        + " |"
    )
    for f in FORMATS:
        r = ratio(rebuilt[f], floors[f])
        goals.append(
            judged(
                f"rebuild of a 1,000-step run, log format {f}, against bare sqlite3 reading "
                "its rows",
                r,
                2.0,
                "at most 2x",
                times(r),
            )
        )
    for f in FORMATS:
        goals.append(
            judged(
                f"replay of a 1,000-step run, log format {f}",
                replayed[f],
                0.100,
                "at most 100 ms",
                both(replayed[f], ms),
            )
        )
    return made


def concurrency_section(runs: int, tmp: Path, log_format: int, goals: list[Goal]) -> None:
    many, steps, latency = 200, 5, 0.020
    c = concurrent_runs(many, steps, latency, tmp)
    ideal_runs = many / c["ideal"]
    print(
        f"\n| {many} concurrent runs on one loop, {steps} steps each, LLM {ms(latency)}, log "
        f"format {log_format} | measured | ideal |"
    )
    print("|---|---:|---:|")
    print(f"| wall time | {ms(c['elapsed'])} | {ms(c['ideal'])} |")
    print(f"| runs/s | {many / c['elapsed']:,.0f} | {ideal_runs:,.0f} |")
    print(f"| facts/s | {c['facts'] / c['elapsed']:,.0f} | {c['facts'] / c['ideal']:,.0f} |")
    print(
        f"| transactions (group commit) | {c['transactions']:,.0f} "
        f"| {c['commits']:,.0f} writes asked |"
    )
    r = c["elapsed"] / c["ideal"]
    goals.append(
        judged(
            f"{many} concurrent runs ({steps} steps, LLM {ms(latency)}), wall time against "
            "the ideal",
            Timing(r, r),
            3.0,
            "at most 3x",
            f"{r:.1f}x",
        )
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller K, no 100,000-step runs")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept")
    args = parser.parse_args()
    k = 200 if args.quick else 1000
    engine_ks = [10, 1000] if args.quick else [10, 1000, 100_000]
    runs = args.repeat
    started = time.perf_counter()
    new_format = default_format()
    print(f"agentsm performance, K = {k:,} steps (one tool call each), best of {runs}")
    print(
        f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )
    print(
        "log formats "
        + " and ".join(map(str, FORMATS))
        + f"; a new log is created in format {new_format}"
    )
    goals: list[Goal] = []
    with tempfile.TemporaryDirectory() as where:
        tmp = Path(where)
        found = persisted_section(k, runs, tmp, goals)
        engine = engine_section(engine_ks, runs, new_format, goals)
        eventsourcing_section(k, runs, tmp, engine[1000], found, goals)
        langgraph_section(k, runs, tmp, found, goals)
        for p in found.values():
            p.store.close()
        made = rebuild_section(runs, tmp, goals)
        concurrency_section(runs, tmp, new_format, goals)

        from perf_memory import report  # it imports this module: not at the top

        report(args.quick, runs, tmp, *made[new_format if new_format in made else FORMATS[-1]])

    print("\n| measure | measured | goal | met? |")
    print("|---|---:|---|---|")
    for g in goals:
        print(f"| {g.what} | {g.measured} | {g.goal} | {g.met} |")
    print(
        f"\nmet: {sum(g.met == 'yes' for g in goals)} of {len(goals)} in wall and CPU time alike; "
        f"load average {os.getloadavg()[0]:.2f} at the end; {time.perf_counter() - started:,.0f} s"
    )


if __name__ == "__main__":
    main()
