"""The `agentsm` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from agentsm import AgentFailed, AgentMemory
from eventstore import SQLiteEventStore, StoreError

from .demo import demo_agent

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    db = args.db
    engine = demo_agent().store(db).build()
    print(f"Task: {engine.memory.task}")
    try:
        answer = engine.run()
    except AgentFailed as e:
        answer = f"(failed) {e.error}"
    print(f"Answer: {answer}\n")
    print(f"Run {engine.run_id} recorded into {db} — its trace:\n")
    engine.trace().print()
    usage = engine.memory.total_usage
    print(
        f"\nsteps={engine.memory.step} state={engine.current_state()} "
        f"tokens={usage.total_tokens} (in {usage.input_tokens}, out {usage.output_tokens})"
    )
    with SQLiteEventStore(db, create=False) as fresh:
        memory, state = AgentMemory.rebuild(fresh, engine.run_id)
    same = memory == engine.memory and state == engine.current_state()
    print(
        f"\nMemory rebuilt from {db} by folding {len(engine.trace())} facts: "
        f"{'identical to the engine memory' if same else 'DIFFERENT from the engine memory'} "
        f"(state {state}, {len(memory.history)} history entries)."
    )
    return 0 if same else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentsm",
        description="Record, inspect and replay agent runs.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="run the demo agent on the mock LLM, print its trace, rebuild its memory",
        description="Runs a research agent on the scripted mock LLM into a SQLite log, prints "
        "the trace and rebuilds the memory from the file.",
        epilog="example: agentsm demo --db /tmp/demo.db",
    )
    demo.add_argument(
        "--db",
        default=os.environ.get("AGENTSM_DEMO_DB", "agentsm-demo.db"),
        help="SQLite file to record into (default: ./agentsm-demo.db)",
    )
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agentsm` command."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except StoreError as e:
        print(f"agentsm: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
