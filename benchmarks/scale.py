"""Runs and facts per second with 1, 4 and 16 writer processes recording into one log, on
SQLite and on PostgreSQL.

    python benchmarks/scale.py                      # SQLite file and the local PostgreSQL
    python benchmarks/scale.py --writers 1 4 --runs 10
    python benchmarks/scale.py --postgres postgresql://me@db.internal/agents --durability full

Each row is the best of `--repeat` measurements (default 3), the two backends measured in turn
for each number of writers, so that both meet the same load.

Each writer process records `--runs` runs of an agent whose mock LLM calls a trivial tool
`--steps` times and then answers (about ten facts and five transactions per step), every run
claimed, appended to and released through the store as in production. The processes start
together once all are connected; the figures are totals over the wall-clock time until the
last one ends. PostgreSQL runs in a schema of its own, dropped afterwards.
`benchmarks/langgraph_scale.py` does the same work with LangGraph's PostgresSaver.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller, tool
from eventstore import open_store

LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


@tool
async def noop(n: int) -> str:
    """Return its argument."""
    return str(n)


def agent(steps: int) -> AgentBuilder:
    script = [LlmResponse.tool_call("noop", {"n": i}) for i in range(steps)]
    script.append(LlmResponse.final_answer("finished after all the steps, as planned"))
    config = AgentConfig(max_steps=steps + 1, reflect_every_n_steps=0)
    return AgentBuilder("benchmark").llm(MockLlmCaller(script)).config(config).tool(noop)


def writer(url: str, runs: int, steps: int, durability: str, ready: Any, go: Any, out: Any) -> None:
    """One writer process: connect, wait for the start, record its runs, report its facts."""
    with closing(open_store(url, durability=durability)) as store:
        ready.release()
        go.wait()
        facts = 0
        for _ in range(runs):
            engine = agent(steps).store(store).build()
            engine.run()
            facts += engine.seq
    out.put(facts)


def measure(url: str, writers: int, runs: int, steps: int, durability: str) -> tuple[float, int]:
    """Seconds from the start until the last writer ends, and the facts they recorded."""
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=writer, args=(url, runs, steps, durability, ready, go, out))
        for _ in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire()
    started = time.perf_counter()
    go.set()
    facts = sum(out.get() for _ in procs)
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a writer process failed (exit code {p.exitcode})")
    return elapsed, facts


def drop_schema(server: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--runs", type=int, default=20, help="runs per writer process")
    parser.add_argument("--steps", type=int, default=5, help="tool steps per run")
    parser.add_argument("--postgres", default=LOCAL_POSTGRES, help="server URL ('' to skip)")
    parser.add_argument("--durability", choices=("normal", "full"), default="normal")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best is shown")
    args = parser.parse_args()
    print(
        f"{args.runs} runs per writer, {args.steps} tool steps per run, durability "
        f"{args.durability}, best of {args.repeat}"
    )
    print("| backend | writers | runs | facts | seconds | runs/s | facts/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")

    def row(backend: str, writers: int, elapsed: float, facts: int) -> None:
        total = writers * args.runs
        print(
            f"| {backend} | {writers} | {total} | {facts} | {elapsed:.2f} "
            f"| {total / elapsed:.1f} | {facts / elapsed:.0f} |",
            flush=True,
        )

    backends = ["SQLite file"] + (["PostgreSQL"] if args.postgres else [])
    with tempfile.TemporaryDirectory() as tmp:
        for writers in args.writers:  # both backends in turn, under the same load
            for backend in backends:
                best = min(
                    (once(backend, writers, Path(tmp), args) for _ in range(args.repeat)),
                    key=lambda found: found[0],
                )
                row(backend, writers, *best)


def once(backend: str, writers: int, tmp: Path, args: argparse.Namespace) -> tuple[float, int]:
    """One measurement in a new log: seconds and facts."""
    if backend == "SQLite file":
        url = str(tmp / f"scale-{uuid.uuid4().hex[:8]}.db")
        open_store(url).close()  # the schema exists before the writers start
        return measure(url, writers, args.runs, args.steps, args.durability)
    schema = f"scale_{uuid.uuid4().hex[:12]}"
    url = f"{args.postgres}{'&' if '?' in args.postgres else '?'}schema={schema}"
    try:
        open_store(url).close()
        return measure(url, writers, args.runs, args.steps, args.durability)
    finally:
        drop_schema(args.postgres, schema)


if __name__ == "__main__":
    main()
