"""Per-step cost of the engine loop and the size of its log, against raw sqlite3 appends.

Each row is the best of `--repeat` runs (default 3), for timings that are not one noisy run.

    python benchmarks/engine.py            # 10, 100 and 1000 steps
    python benchmarks/engine.py --steps 10 100

The agent is a mock LLM calling a trivial tool every step, then answering. Each step records
about ten facts in four transactions (plan, tool started, tool executed, observation). The
"raw floor" appends the very same rows, in the very same transactions, with bare sqlite3.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentsm import AgentBuilder, AgentConfig, AgentMemory, LlmResponse, MockLlmCaller, tool
from eventstore import NewEvent, RunSummary, SQLiteEventStore


@tool
async def noop(n: int) -> str:
    """Return its argument (async: a sync tool starts a thread per call)."""
    return str(n)


class CountingStore(SQLiteEventStore):
    """The real store, remembering each appended batch so the floor can repeat it."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.batches: list[list[NewEvent]] = []

    def append(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[NewEvent],
        *,
        status: str | None = None,
        durable: bool = False,
        summary: RunSummary | None = None,
    ) -> int:
        self.batches.append(list(events))
        return super().append(
            run_id, expected_seq, events, status=status, durable=durable, summary=summary
        )


def agent(steps: int, store: SQLiteEventStore) -> AgentBuilder:
    script = [LlmResponse.tool_call("noop", {"n": i}) for i in range(steps)]
    script.append(LlmResponse.final_answer("finished after all the steps, as planned"))
    config = AgentConfig(max_steps=steps + 1, reflect_every_n_steps=0)
    return (
        AgentBuilder("benchmark").llm(MockLlmCaller(script)).config(config).tool(noop).store(store)
    )


def raw_floor(batches: list[list[NewEvent]], path: str) -> float:
    """Seconds to append the same rows in the same transactions with bare sqlite3."""
    conn = sqlite3.connect(path, isolation_level=None)
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        "CREATE TABLE events (run_id TEXT, seq INTEGER, kind TEXT, payload TEXT, meta TEXT, "
        "recorded_at REAL, version INTEGER, PRIMARY KEY (run_id, seq))"
    )
    conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, last_seq INTEGER)")
    conn.execute("INSERT INTO runs VALUES ('r', 0)")
    seq = 0
    started = time.perf_counter()
    for batch in batches:
        rows = []
        for e in batch:
            seq += 1
            rows.append(("r", seq, e.kind, e.payload, e.meta, e.recorded_at, 1))
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("UPDATE runs SET last_seq = ? WHERE run_id = 'r'", (seq,))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def db_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages, size = (
        conn.execute("PRAGMA page_count").fetchone()[0],
        conn.execute("PRAGMA page_size").fetchone()[0],
    )
    conn.close()
    return int(pages * size)


def measure(steps: int, where: str, tmp: Path) -> dict[str, Any]:
    path = ":memory:" if where == "memory" else str(tmp / f"bench-{steps}.db")
    floor_path = ":memory:" if where == "memory" else str(tmp / f"floor-{steps}.db")
    for p in (path, floor_path):
        if p != ":memory:" and os.path.exists(p):
            os.remove(p)
    store = CountingStore(path)
    engine = agent(steps, store).build()
    started = time.perf_counter()
    engine.run()
    elapsed = time.perf_counter() - started
    facts = engine.seq
    result: dict[str, Any] = {
        "steps": steps,
        "log": where,
        "ms_per_step": elapsed * 1000 / steps,
        "floor_ms_per_step": raw_floor(store.batches, floor_path) * 1000 / steps,
        "facts": facts,
        "transactions": len(store.batches),
    }
    if where == "file":
        result["kb_per_step"] = db_bytes(path) / 1024 / steps
        fresh = SQLiteEventStore(path, create=False)
        started = time.perf_counter()
        memory, _ = AgentMemory.rebuild(fresh, engine.run_id)
        result["rebuild_ms"] = (time.perf_counter() - started) * 1000
        assert memory == engine.memory
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best is shown")
    args = parser.parse_args()
    print(
        "| steps | log | ms/step | raw sqlite3 floor ms/step | ratio | facts | transactions "
        "| KB/step | rebuild ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for steps in args.steps:
            for where in ("memory", "file"):
                runs = [measure(steps, where, Path(tmp)) for _ in range(args.repeat)]
                r = min(runs, key=lambda x: x["ms_per_step"])
                r["floor_ms_per_step"] = min(x["floor_ms_per_step"] for x in runs)
                if "rebuild_ms" in r:
                    r["rebuild_ms"] = min(x["rebuild_ms"] for x in runs)
                kb = f"{r['kb_per_step']:.2f}" if "kb_per_step" in r else "-"
                rebuild = f"{r['rebuild_ms']:.1f}" if "rebuild_ms" in r else "-"
                print(
                    f"| {steps} | {where} | {r['ms_per_step']:.3f} | {r['floor_ms_per_step']:.3f} "
                    f"| {r['ms_per_step'] / r['floor_ms_per_step']:.1f}x | {r['facts']} "
                    f"| {r['transactions']} | {kb} | {rebuild} |"
                )


if __name__ == "__main__":
    main()
