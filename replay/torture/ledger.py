"""The tools' ledger: a SQLite file with one row per execution of a torture agent's tool, keyed
by the call's idempotency key, so that an effect that happened twice shows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS effects (key TEXT NOT NULL, run_id TEXT NOT NULL, "
    "tool TEXT NOT NULL, idempotent INTEGER NOT NULL, pid INTEGER NOT NULL, at REAL NOT NULL)"
)


def open_ledger(path: str | Path) -> sqlite3.Connection:
    """The ledger (created if need be), in autocommit mode, waiting long for its lock."""
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(SCHEMA)
    return conn


def writes_taken(ledger: Path) -> list[tuple[str, int]]:
    """(key, pid) of every execution of a non-idempotent tool, in the order they happened."""
    if not ledger.exists():
        return []
    conn = sqlite3.connect(ledger, timeout=60)
    try:
        return list(conn.execute("SELECT key, pid FROM effects WHERE idempotent = 0 ORDER BY at"))
    finally:
        conn.close()
