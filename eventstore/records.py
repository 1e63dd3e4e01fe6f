"""The plain records the store reads and writes: one stored event and one run of the catalog."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .blobs import Blob
from .driver import Driver

__all__ = [
    "InboxMessage",
    "NewEvent",
    "RunRecord",
    "RunSummary",
    "StoredEvent",
    "meta_text",
    "with_riders",
]

SUMMARY_TEXT = 200
"""How many characters of the final answer and of the error the catalog keeps."""


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event about to be appended: its kind, its JSON payload and envelope metadata (JSON
    text too, so that writers encode each event once)."""

    kind: str
    payload: str
    meta: str = "{}"
    recorded_at: float = 0.0
    version: int = 1
    chain: int = 2
    """The version of the hash the store gives it (`eventstore.chain`): 2, unless an import
    carries a fact hashed in version 1 by an earlier release."""
    blobs: tuple[Blob, ...] = ()
    """Blobs its payload refers to, stored in the same transaction where the store does not
    hold them yet (`eventstore.blobs`); the hash covers their digests, in the payload."""
    rides: bool = False
    """It follows from the event before it in the same append (a transition, a step's start):
    a store may keep it in that event's row (log format 2, `eventstore.sqlite_format2`)."""


def meta_text(meta: Mapping[str, Any]) -> str:
    """An envelope read back (an export's, another store's) as the recorder writes it:
    compact JSON in its own order, text outside ASCII escaped, so that a store keeps it as it
    keeps a recorded one (log format 2 puts a plain state and step in columns)."""
    return json.dumps(meta, separators=(",", ":"))


def with_riders(events: Sequence[NewEvent], riders: Container[str]) -> list[NewEvent]:
    """The events of one append (an import's, a copy's), each marked `rides` as its recorder
    marked it: of a kind in `riders`, after another event, recorded at that event's time (a
    recorder gives a fact that follows from the one before it that fact's time)."""
    marked = list(events)
    for n in range(1, len(marked)):
        e = marked[n]
        if e.kind in riders and e.recorded_at == marked[n - 1].recorded_at and not e.rides:
            marked[n] = dataclasses.replace(e, rides=True)
    return marked


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event of a run's log, as stored: `seq` counts 1, 2, 3 ... per run without gaps."""

    run_id: str
    seq: int
    kind: str
    payload: str
    meta: dict[str, Any]
    recorded_at: float
    version: int
    hash: str | None = None
    """SHA-256 chained to the run's previous event (see `eventstore.chain`); None for events
    recorded before the store kept hashes."""

    def __repr__(self) -> str:
        return f"StoredEvent(run_id={self.run_id!r}, seq={self.seq}, kind={self.kind!r})"


@dataclass(frozen=True, slots=True)
class InboxMessage:
    """A message posted to a run from outside (`Inbox.post`): its number `n` (1, 2, 3 ... per
    run, in the order posted), its `kind` and `payload` (the store gives them no meaning) and
    when it was posted."""

    run_id: str
    n: int
    kind: str
    payload: str
    posted_at: float

    def __repr__(self) -> str:
        return f"InboxMessage(run_id={self.run_id!r}, n={self.n}, kind={self.kind!r})"


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a listing shows of a run, kept in the catalog in the same transaction as its facts."""

    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    """USD where the model's price is known, else None."""
    model: str | None = None
    answer: str | None = None
    """The start of the final answer (at most 200 characters)."""
    error: str | None = None
    """The start of the error (at most 200 characters)."""

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __repr__(self) -> str:
        fields = [f"steps={self.steps}", f"tokens={self.tokens}"]
        fields += [f"{k}={v!r}" for k in ("model", "answer", "error") if (v := getattr(self, k))]
        return f"RunSummary({', '.join(fields)})"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run in the catalog: who it descends from, where it stands, how far its log goes."""

    run_id: str
    task: str
    status: str
    created_at: float
    updated_at: float
    last_seq: int
    parent_id: str | None = None
    branch_seq: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    driver: Driver | None = None
    lease_until: float | None = None
    summary: RunSummary = RunSummary()
    previous: tuple[Driver, float | None] | None = None
    """On a record `claim_next` returns: the driver the run was taken from and its lease's end
    (None: nobody drove it), so that the new driver knows what may still be under way there."""

    def driver_gone(self) -> bool:
        """Whether the run says "running" but no process drives it (its driver was killed, its
        lease ran out, or it let the run go after a store error): it will not go on by itself;
        a worker takes it, or resume it."""
        if self.status != "running":
            return False
        if self.driver is None:
            return True
        alive = self.driver.alive()
        return alive is False or (alive is None and (self.lease_until or 0) < time.time())

    @property
    def shown_status(self) -> str:
        """The status as a reader should see it: "interrupted" for a run whose driver is gone."""
        return "interrupted" if self.driver_gone() else self.status

    def __repr__(self) -> str:
        parent = f", parent_id={self.parent_id!r}@{self.branch_seq}" if self.parent_id else ""
        return (
            f"RunRecord(run_id={self.run_id!r}, status={self.status!r}, "
            f"last_seq={self.last_seq}{parent})"
        )
