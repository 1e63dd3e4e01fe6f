"""Opening the logs of the worker, tail and OpenTelemetry tests (the `log_url` fixture gives a
URL or path on each backend) in this process and in worker subprocesses."""

from __future__ import annotations

from typing import Any

from eventstore import EventStore
from replay.source import open_store

OPENED: list[EventStore] = []
"""The stores a test opened, closed after it (`close_opened`, from conftest)."""


def connect(url: str, **options: Any) -> EventStore:
    """Open (creating it if needed) the log at `url`; it is closed after the test."""
    store = open_store(url, create=True, **options)
    OPENED.append(store)
    return store


def close_opened() -> None:
    """Close the stores the test opened with `connect`."""
    while OPENED:
        OPENED.pop().close()
