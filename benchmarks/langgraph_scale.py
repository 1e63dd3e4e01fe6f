"""The workload of `scale.py` on LangGraph with its PostgresSaver, for comparison: runs and
checkpoints per second with 1, 4 and 16 writer processes.

    pip install langgraph langgraph-checkpoint-postgres
    python benchmarks/langgraph_scale.py --postgres postgresql://postgres@127.0.0.1:5432/test

Each run is a graph of an LLM node (a stand-in answering from the state, as the mock LLM of
`scale.py` does) and a tool node, looping `--steps` times before the answer; the checkpointer
saves the state after every super-step. It needs neither agentsm nor its dependencies.
`perf.py` runs the same graph on LangGraph's SqliteSaver (`graph` needs no PostgreSQL driver).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import operator
import time
import urllib.parse
import uuid
from typing import Annotated, Any, TypedDict


class State(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]
    step: int


def graph(steps: int, checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    def llm(state: State) -> dict[str, Any]:
        if state["step"] < steps:
            call = {"name": "noop", "args": {"n": state["step"]}, "id": f"c{state['step']}"}
            return {"messages": [{"role": "assistant", "tool_calls": [call]}]}
        return {"messages": [{"role": "assistant", "content": "finished, as planned"}]}

    def tools(state: State) -> dict[str, Any]:
        n = state["messages"][-1]["tool_calls"][0]["args"]["n"]
        return {"messages": [{"role": "tool", "content": str(n)}], "step": state["step"] + 1}

    builder = StateGraph(State)
    builder.add_node("llm", llm)
    builder.add_node("tools", tools)
    builder.add_edge(START, "llm")
    builder.add_conditional_edges("llm", lambda s: "tools" if s["step"] < steps else END)
    builder.add_edge("tools", "llm")
    return builder.compile(checkpointer=checkpointer)


def writer(url: str, runs: int, steps: int, ready: Any, go: Any, out: Any) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as saver:
        app = graph(steps, saver)
        ready.release()
        go.wait()
        for _ in range(runs):
            config = {"configurable": {"thread_id": uuid.uuid4().hex}}
            app.invoke({"messages": [{"role": "user", "content": "benchmark"}], "step": 0}, config)
    out.put(0)


def measure(url: str, writers: int, runs: int, steps: int) -> float:
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=writer, args=(url, runs, steps, ready, go, out)) for _ in range(writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire()
    started = time.perf_counter()
    go.set()
    for _ in procs:
        out.get()
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a writer process failed (exit code {p.exitcode})")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--runs", type=int, default=20, help="runs per writer process")
    parser.add_argument("--steps", type=int, default=5, help="tool steps per run")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best is shown")
    args = parser.parse_args()
    print("| backend | writers | runs | checkpoints | seconds | runs/s | checkpoints/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for writers in args.writers:
        elapsed, saved = min(
            (once(args.postgres, writers, args.runs, args.steps) for _ in range(args.repeat)),
            key=lambda found: found[0],
        )
        total = writers * args.runs
        print(
            f"| LangGraph PostgresSaver | {writers} | {total} | {saved} | {elapsed:.2f} "
            f"| {total / elapsed:.1f} | {saved / elapsed:.0f} |",
            flush=True,
        )


def once(server: str, writers: int, runs: int, steps: int) -> tuple[float, int]:
    """One measurement in a new schema: seconds, and the checkpoints saved."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import sql

    schema = f"lg_{uuid.uuid4().hex[:12]}"
    options = urllib.parse.quote(f"-csearch_path={schema}")
    url = f"{server}{'&' if '?' in server else '?'}options={options}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
        elapsed = measure(url, writers, runs, steps)
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*) FROM checkpoints").fetchone()
        return elapsed, int(row[0]) if row else 0
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
