"""What a run hears from outside while it goes on: messages steering it and requests to stop.

They come from this process (`AgentEngine.steer`, `request_stop`) or from anywhere through the
store's inbox (`eventstore.Inbox`: `replay.steer`, `replay.request_stop`, `agentsm steer`, `stop`),
since only the run's driver may append to it. The engine looks between two transitions; what it
takes it records as facts (`Steered`, `StopRequested`), and marks the inbox's messages taken in
the transaction that commits those facts. Replay serves the recorded ones back at the same
places (`Messages` is the seam)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from eventstore import EventStore, Inbox, InboxMessage

from . import facts as f
from .codec import clean_text

__all__ = [
    "STEER",
    "STOP",
    "Heard",
    "Messages",
    "StoreMessages",
    "heard_of",
    "send_steer",
    "send_stop",
]

Heard = f.Steered | f.StopRequested
"""A fact recording a message the run took from outside."""

STEER = "steer"
STOP = "stop"
"""The kinds of the messages agentsm posts to a store's inbox (their payload is the text)."""


@runtime_checkable
class Messages(Protocol):
    """Where an engine hears the messages sent to its run from outside the process."""

    def due(self, last: int) -> tuple[list[Heard], int]:
        """The messages to record now, the run's log being at seq `last` (recorded, committed
        or not), in order, and the number of the last inbox message among them (0: none)."""
        ...


def heard_of(messages: Sequence[InboxMessage]) -> list[Heard]:
    """The facts the inbox's messages are recorded as (a kind agentsm does not post is
    skipped: taken, recorded as nothing)."""
    heard: list[Heard] = []
    for m in messages:
        if m.kind == STEER:
            heard.append(f.Steered(text=clean_text(m.payload)))
        elif m.kind == STOP:
            heard.append(f.StopRequested(reason=clean_text(m.payload)))
    return heard


class StoreMessages:
    """The messages waiting in the store's inbox for the run (none for a store without one)."""

    def __init__(self, store: EventStore, run_id: str) -> None:
        self._inbox = store if isinstance(store, Inbox) else None
        self._run_id = run_id

    def due(self, last: int) -> tuple[list[Heard], int]:
        if self._inbox is None:
            return [], 0
        waiting = self._inbox.pending(self._run_id)
        if not waiting:
            return [], 0
        return heard_of(waiting), waiting[-1].n

    def __repr__(self) -> str:
        return f"StoreMessages({self._run_id!r}, inbox={self._inbox is not None})"


class LocalMessages:
    """The messages this process sends the run (`AgentEngine.steer`, `request_stop`), from
    any thread, taken in the order sent."""

    def __init__(self) -> None:
        self._queue: deque[Heard] = deque()
        self._lock = threading.Lock()

    def put(self, fact: Heard) -> None:
        with self._lock:
            self._queue.append(fact)

    def take(self) -> list[Heard]:
        if not self._queue:
            return []
        with self._lock:
            taken = list(self._queue)
            self._queue.clear()
        return taken

    def __repr__(self) -> str:
        return f"LocalMessages({len(self._queue)} waiting)"


def send_steer(store: EventStore, run_id: str, text: str) -> int:
    """Post a steering message to the run's inbox; its number."""
    return _inbox(store).post(run_id, STEER, text)


def send_stop(store: EventStore, run_id: str, reason: str = "") -> int:
    """Post a stop request to the run's inbox; its number."""
    return _inbox(store).post(run_id, STOP, reason)


def _inbox(store: EventStore) -> Inbox:
    if not isinstance(store, Inbox):
        raise TypeError(
            f"{store!r} has no inbox: messages to a run from outside need a store that takes "
            "them (SQLiteEventStore, PostgresEventStore)."
        )
    return store
