"""How fast `agentsm search` answers on a large log: N generated facts (default one million)
on SQLite and on PostgreSQL, the time to index them all (what the first search of a log that
was never searched does), then the time of a few searches as the command makes them.

    python benchmarks/search.py                                   # both backends
    python benchmarks/search.py --backend sqlite --facts 100000 --db /tmp/s.db --keep
    python benchmarks/search.py --backend postgresql --postgres postgresql://u@host/db

The facts are written directly (executemany on SQLite, COPY on PostgreSQL) into a log made by
the store, so the schema, triggers and indexes are the real ones: runs of 20 facts (a task, LLM
answers with tool calls, tool observations of several lines with numbers, names, e-mail
addresses and URLs, a final answer), words drawn from a Zipf-like vocabulary. Each search is
`search(text, kinds=SEARCHED, limit=50)`, snippets included; each figure is the best of
`--repeat` runs, after a first one (shown too) that found the pages cold.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import random
import re
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eventstore import PostgresEventStore, SQLiteEventStore
from replay.cli.listing import SEARCHED

print = functools.partial(print, flush=True)  # noqa: A001  # progress as it comes

COMMON = (
    "the of and to a in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when if so "
    "no will can more about said up out them some could into then time other only these two "
    "may first do any like my now over such our man me even most made after also did many "
    "before must through back years where much your way well down should because each just "
    "those people how too little state good very make world still own see men work long get "
    "here between both life being under never day same another know while last might us great "
    "old year off come since against go came right used take three"
).split()
DOMAIN = (
    "invoice refund payment order customer account balance ledger contract ticket flight hotel "
    "booking report summary search result page population capital city country inhabitants "
    "area square kilometres price total amount currency euro dollar tax vat shipment parcel "
    "delivery address warehouse stock supplier quote discount approval manager review policy "
    "error timeout retry status success failed unavailable permission denied database query "
    "table column record export import schedule meeting calendar email message attachment "
    "document translation language reconcile reconciliation quarterly annual monthly weekly "
    "deadline escalate priority urgent resolved pending cancelled confirmed estimate forecast"
).split()
SYLLABLES = (
    "ka lo mi ne ra ti so vu be da fe gi ho ju ko lu ma no pe ri sa te vo za ber ski".split()
)
FIRST = "anna bob carla dmitri elena farid greta hiro ines jonas kofi lena marta nils olga".split()
COMPANIES = "acme globex initech umbrella stark wayne hooli vandelay soylent cyberdyne".split()


def _surnames(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))) for _ in range(n)]


class Texts:
    """Sentences from a Zipf-like vocabulary with names, numbers, addresses and URLs."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.names = _surnames(rng, 5000)
        self.vocab = COMMON + DOMAIN + self.names
        self.weights = list(
            itertools.accumulate(1 / (i + 1) ** 1.05 for i in range(len(self.vocab)))
        )

    def words(self, n: int) -> list[str]:
        return self.rng.choices(self.vocab, cum_weights=self.weights, k=n)

    def sentence(self) -> str:
        rng = self.rng
        words = self.words(rng.randint(6, 18))
        extra = rng.random()
        if extra < 0.15:
            words.insert(rng.randrange(len(words)), f"{rng.randint(1, 9)},{rng.randint(100, 999)}")
        elif extra < 0.22:
            first, last, company = rng.choice(FIRST), rng.choice(self.names), rng.choice(COMPANIES)
            words.append(f"{first}.{last}@{company}.com")
        elif extra < 0.28:
            site, topic = rng.choice(COMPANIES), rng.choice(DOMAIN)
            words.append(f"https://docs.{site}.com/{topic}/item-{rng.randint(1, 9999)}")
        elif extra < 0.33:
            words.insert(0, f"INV-{rng.randint(2019, 2025)}-{rng.randint(1, 99999):05d}")
        return " ".join(words).capitalize() + "."

    def paragraph(self, lines: int) -> str:
        return "\n".join(
            " ".join(self.sentence() for _ in range(self.rng.randint(1, 2))) for _ in range(lines)
        )


def facts(n: int, *, seed: int = 11) -> Iterator[tuple[str, str, int, str, str, float, int, str]]:
    """`n` facts, runs of 20: (run_id, task, seq, kind, payload, recorded_at, version, hash)."""
    rng = random.Random(seed)
    texts = Texts(rng)
    now = time.time()
    run_id, task, at = "", "", 0.0
    payload: dict[str, Any]
    for i in range(n):
        seq = i % 20 + 1
        if seq == 1:
            run_id = uuid.UUID(int=rng.getrandbits(128)).hex
            task = texts.sentence()
            at = now - rng.random() * 30 * 86400
            kind, payload = "RunStarted", {"task": task, "task_type": "general"}
        elif seq == 20:
            kind, payload = "FinalAnswerProduced", {"content": texts.paragraph(2)}
        elif seq % 3 == 2:
            call: dict[str, Any] = {"id": f"call_{rng.getrandbits(64):016x}"}
            call["name"] = rng.choice(DOMAIN)
            call["arguments"] = {"query": " ".join(texts.words(4))}
            response = {"content": texts.paragraph(rng.randint(1, 3)), "calls": [call]}
            kind, payload = "LlmResponded", {"purpose": "plan", "response": response}
        elif seq % 3 == 0:
            observation = "SUCCESS: " + texts.paragraph(rng.randint(2, 5))
            kind, payload = (
                "ToolExecuted",
                {"index": 0, "observation": observation, "success": True},
            )
        else:
            kind, payload = "ToolCallStarted", {"index": 0}
        at += rng.random() * 5
        yield run_id, task, seq, kind, json.dumps(payload), at, 1, f"{rng.getrandbits(128):032x}"


def fill_sqlite(db: Path, n: int) -> float:
    started = time.perf_counter()
    SQLiteEventStore(db).close()  # the real schema, migrations and triggers
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    for chunk in _chunks(facts(n), 50_000):
        conn.executemany(
            "INSERT INTO runs (run_id, task, status, created_at, updated_at, last_seq) "
            "VALUES (?, ?, 'done', ?, ?, 20)",
            [(f[0], f[1], f[5], f[5]) for f in chunk if f[2] == 1],
        )
        conn.executemany(
            "INSERT INTO events (run_id, seq, kind, payload, meta, recorded_at, version, hash) "
            "VALUES (?, ?, ?, ?, '{}', ?, ?, ?)",
            [(f[0], f[2], f[3], f[4], f[5], f[6], f[7]) for f in chunk],
        )
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - started


def fill_postgres(url: str, schema: str, n: int) -> float:
    import psycopg

    started = time.perf_counter()
    PostgresEventStore(url, schema=schema).close()  # the real schema, migrations and triggers
    with psycopg.connect(url) as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute("SET synchronous_commit TO off")
        for chunk in _chunks(facts(n), 50_000):
            with conn.cursor().copy(
                "COPY runs (run_id, task, status, created_at, updated_at, last_seq) FROM STDIN"
            ) as copy:
                for f in chunk:
                    if f[2] == 1:
                        copy.write_row((f[0], f[1], "done", f[5], f[5], 20))
            with conn.cursor().copy(
                "COPY events (run_id, seq, kind, payload, meta, recorded_at, version, hash) "
                "FROM STDIN"
            ) as copy:
                for f in chunk:
                    copy.write_row((f[0], f[2], f[3], f[4], "{}", f[5], f[6], f[7]))
            conn.commit()
        conn.execute("ANALYZE")
    return time.perf_counter() - started


def _chunks(rows: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(itertools.islice(rows, size)):
        yield chunk


def queries(sample: int = 5000) -> list[tuple[str, str]]:
    """The searches timed, with what each shows (words and an address of the generated text)."""
    names = _surnames(random.Random(11), 5000)  # the first Texts' names, same seed and order
    address = next(
        found.group()
        for fact in facts(sample)
        if (found := re.search(r"[a-z]+\.[a-z]+@[a-z]+\.com", fact[4]))
    )
    return [
        ("rare word", names[-1]),
        ("two words", f"refund {names[1500]}"),
        ("common word", "invoice"),
        ("most common word", "the"),
        ("prefix", "reconcil*"),
        ("phrase", '"the invoice"'),
        ("e-mail address", address),
        ("no match", "zyzzyva"),
    ]


def time_searches(store: Any, repeat: int) -> None:
    for label, text in queries():
        times = []
        hits: list[Any] = []
        for _ in range(repeat + 1):
            started = time.perf_counter()
            hits = store.search(text, kinds=SEARCHED, limit=50)
            times.append(time.perf_counter() - started)
        print(
            f"  {label:17} {text!r:34} {min(times[1:]) * 1000:7.1f} ms  "
            f"(first {times[0] * 1000:.0f} ms, {len(hits)} hits)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--db", type=Path, help="the SQLite log (default: a temp file)")
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "AGENTSM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--keep", action="store_true", help="keep the logs afterwards")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        tmp = tempfile.TemporaryDirectory()
        db = args.db or Path(tmp.name) / "search.db"
        if db.exists():
            print(f"SQLite: using the existing {db}")
        else:
            seconds = fill_sqlite(db, args.facts)
            print(f"SQLite: wrote {args.facts:,} facts into {db} in {seconds:.0f} s")
        with SQLiteEventStore(db, create=False) as store:
            started = time.perf_counter()
            indexed = store.index_for_search()
            print(f"  indexed {indexed:,} facts in {time.perf_counter() - started:.0f} s")
            time_searches(store, args.repeat)
        if args.keep and args.db is None:
            kept = Path(tempfile.gettempdir()) / "agentsm-search.db"
            db.replace(kept)
            print(f"  kept the log at {kept}")
    if args.backend in ("postgresql", "both"):
        schema = f"bench_search_{args.facts}"
        pg: PostgresEventStore | None = None
        try:
            pg = PostgresEventStore(args.postgres, schema=schema)
            if pg.runs(limit=1):
                print(f"PostgreSQL: using the existing schema {schema}")
            else:
                pg.close()
                seconds = fill_postgres(args.postgres, schema, args.facts)
                print(f"PostgreSQL: wrote {args.facts:,} facts into {schema} in {seconds:.0f} s")
                pg = PostgresEventStore(args.postgres, schema=schema)
            started = time.perf_counter()
            indexed = pg.index_for_search()
            print(f"  indexed {indexed:,} facts in {time.perf_counter() - started:.0f} s")
            time_searches(pg, args.repeat)
        finally:
            if pg is not None:
                pg.close()
            if not args.keep:
                import psycopg

                with psycopg.connect(args.postgres, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    main()
