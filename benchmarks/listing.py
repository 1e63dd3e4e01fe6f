"""How fast `agentsm runs` answers on a large catalog: a generated log of N runs (default one
million) and the time of the filtered listing, in-process and as a command.

    python benchmarks/listing.py                 # 1,000,000 runs in a temporary file
    python benchmarks/listing.py --runs 100000 --db /tmp/big.db --keep

The catalog rows are generated directly (executemany into a log made by SQLiteEventStore, so
the schema, indexes and triggers are the real ones): runs over the last 30 days, 85% done, 8%
failed, 2% aborted, 5% waiting, five models, tasks from a small vocabulary. The listing is the
issue's `agentsm runs -n 50 --status error --since 2h --task TEXT --model M`; the command's time
includes starting Python and importing agentsm. Each figure is the best of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eventstore import SQLiteEventStore
from replay.cli.listing import select

MODELS = ("gpt-4o", "gpt-4o-mini", "claude-sonnet-4", "claude-3-5-haiku", "llama-3-70b")
VERBS = ("Summarise", "Refund", "Book", "Translate", "Check", "Find", "Reconcile", "Draft")
THINGS = ("invoice", "flight", "contract", "ticket", "report", "order", "payment", "email")
STATUSES = ["done"] * 85 + ["failed"] * 8 + ["aborted"] * 2 + ["waiting"] * 5


def generate(db: Path, runs: int, *, seed: int = 7) -> float:
    """Write `runs` catalog rows into a new log at `db`; returns the seconds it took."""
    started = time.perf_counter()
    SQLiteEventStore(db).close()  # the real schema, migrations and indexes
    rng = random.Random(seed)
    now = time.time()
    import sqlite3

    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    indexes = [  # dropped while the rows go in, then made again from their own SQL
        (name, sql)
        for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' "
            "AND sql IS NOT NULL"
        )
    ]
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    batch = 50_000
    for start in range(0, runs, batch):
        rows = []
        for n in range(start, min(start + batch, runs)):
            created = now - rng.random() * 30 * 86400
            status = rng.choice(STATUSES)
            steps = rng.randint(1, 15)
            tokens_in, tokens_out = steps * rng.randint(200, 900), steps * rng.randint(20, 200)
            task = f"{rng.choice(VERBS)} {rng.choice(THINGS)} #{n} for customer {n % 9973}"
            failed = status in ("failed", "aborted")
            rows.append(
                (
                    f"{rng.getrandbits(48):012x}",
                    task,
                    status,
                    created,
                    created + rng.random() * 600,
                    steps * 9,
                    "{}",
                    steps,
                    tokens_in,
                    tokens_out,
                    rng.choice(MODELS),
                    None if failed else "The work is done: " + task.lower(),
                    "MaxStepsExceeded: the run used its 15 steps" if failed else None,
                )
            )
        conn.executemany(
            "INSERT OR IGNORE INTO runs (run_id, task, status, created_at, updated_at, "
            "last_seq, info, steps, input_tokens, output_tokens, model, answer, error) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.commit()
    for _, sql in indexes:
        conn.execute(sql)
    conn.execute("ANALYZE")
    conn.commit()
    conn.close()
    return time.perf_counter() - started


COMMAND = ("runs", "-n", "50", "--status", "error", "--since", "2h", "--task", "invoice")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path, help="where to write the log (default: a temp file)")
    parser.add_argument("--keep", action="store_true", help="keep the log afterwards")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    db = args.db or Path(tmp.name) / "catalog.db"
    if db.exists():
        print(f"using the existing {db}")
    else:
        seconds = generate(db, args.runs)
        print(f"generated {args.runs:,} runs into {db} in {seconds:.1f} s")
    store = SQLiteEventStore(db, create=False, read_only=True)
    total = len(store.runs(limit=None)) if args.runs <= 100_000 else args.runs
    found: list[object] = []
    best = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        found = list(
            select(
                store,
                status="error",
                model="gpt-4o",
                task="invoice",
                since=time.time() - 7200,
                limit=50,
            )
        )
        best = min(best, time.perf_counter() - started)
    print(f"in-process  select(error, 2h, task, model, limit 50): {best * 1000:.1f} ms")
    print(f"            {len(found)} runs of {total:,}")
    line = [*COMMAND, "--model", "gpt-4o", "--db", str(db)]
    best = float("inf")
    out = ""
    for _ in range(args.repeat):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "replay", *line],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "COLUMNS": "100"},
        )
        best = min(best, time.perf_counter() - started)
        out = done.stdout
    print(f"command     agentsm {' '.join(line[:-2])}: {best * 1000:.0f} ms")
    print(f"            ({out.count(chr(10)) - 1} rows listed)")
    store.close()
    if args.keep and args.db is None:
        kept = Path(tempfile.gettempdir()) / "agentsm-listing.db"
        db.replace(kept)
        print(f"kept the log at {kept}")


if __name__ == "__main__":
    main()
