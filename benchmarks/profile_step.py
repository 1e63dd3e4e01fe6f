"""Where a step's time goes: `benchmarks/perf.py`'s workload under cProfile, its self time
summed by part of agentsm, as shares (cProfile slows small functions most, so read the shares
as an order, not as times).

    python benchmarks/profile_step.py              # a store that keeps nothing (engine only)
    python benchmarks/profile_step.py --store file # a SQLite file (the default log format)
    python benchmarks/profile_step.py --store memory

For instructions a step, steady whatever else the machine does, run the same workload under
callgrind at two K and take the difference:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/profile_step.py --store null --steps 100 --quiet
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import perf  # noqa: E402  (this folder's benchmark, for its workload)

from eventstore import SQLiteEventStore  # noqa: E402

PARTS = (
    ("store (eventstore, sqlite3)", ("/eventstore/", "sqlite3")),
    ("recording (recorder, codec, JSON)", ("/agentsm/recorder.py", "/agentsm/codec.py", "json")),
    ("fold (memory, reducers)", ("/agentsm/memory.py", "/agentsm/reduc", "/agentsm/places.py")),
    ("event loop (asyncio)", ("asyncio", "selectors", "select", "_contextvars")),
    ("engine, states, run context, tools", ("/agentsm/", "/benchmarks/")),
    ("pydantic", ("pydantic", "validate", "SchemaSerializer")),
)


def part_of(file: str, function: str) -> str:
    """The part of the program a profiled function belongs to."""
    for part, marks in PARTS:
        if any(mark in file or mark in function for mark in marks):
            return part
    return "other (standard library, builtins)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["null", "file", "memory"], default="null")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--quiet", action="store_true", help="run only (for callgrind)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    store = {
        "null": lambda: perf.NullStore(),
        "file": lambda: SQLiteEventStore(Path(folder) / "log.db"),
        "memory": lambda: SQLiteEventStore(":memory:"),
    }[args.store]()
    engine = perf.agent(args.steps, store).build()
    if args.quiet:
        engine.run()
        return
    profile = cProfile.Profile()
    profile.enable()
    engine.run()
    profile.disable()
    shares: collections.Counter[str] = collections.Counter()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    for (file, _line, function), (_cc, _nc, own, _cum, _callers) in stats.items():
        shares[part_of(file, function)] += own
    total = sum(shares.values())
    print(f"self time of a {args.steps}-step run, store: {args.store}")
    for part, own in shares.most_common():
        print(f"{part:40s} {own / total:6.1%}")


if __name__ == "__main__":
    main()
