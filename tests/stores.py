"""The stores the worker, tail and OpenTelemetry tests run on: one fixture makes them all.

Each kind gives a fresh, empty log as a URL (or path) that `open_store` and `--db` accept, so
that the same test drives any backend in this process and in worker subprocesses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eventstore import EventStore
from replay.source import open_store

STORE_KINDS = ["sqlite"]
"""The backends under test; a backend that comes later adds its kind here and in `new_log`."""


def new_log(kind: str, tmp_path: Path) -> str:
    """A fresh, empty log of this kind, as the URL or path to open it with."""
    if kind == "sqlite":
        return str(tmp_path / "runs.db")
    raise ValueError(f"no store kind {kind!r}")  # pragma: no cover


def connect(url: str, **options: Any) -> EventStore:
    """Open (creating it if needed) the log at `url`."""
    return open_store(url, create=True, **options)
