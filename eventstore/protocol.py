"""The one small protocol every event store backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from .chain import ChainReport
from .records import InboxMessage, NewEvent, RunRecord, RunSummary, StoredEvent

__all__ = ["AsyncAppend", "AsyncDrive", "EventStore", "Inbox", "PayloadReader", "Searchable"]


@runtime_checkable
class EventStore(Protocol):
    """Append-only, per-run event logs plus a catalog of runs.

    `create_run` and `append` are all-or-nothing: a run enters the catalog with its first events
    in one transaction, and every event of one `append` lands in one transaction with the run's
    status, or none does; a failed write leaves the store usable. `expected_seq` is the last
    sequence number the writer has seen; if the log has moved on, `ConcurrencyError` is raised
    and nothing is written. `durable=True` marks an append that an effect follows (a tool
    call, an LLM call, the run handed back to its caller): a store set for power-loss
    durability makes that commit reach the disk before it returns. Every event is stored with
    a hash chained to its run's previous one; `verify` checks that chain (`eventstore.chain`).
    A writer `claim`s a run before appending to it (refused while another live process drives
    it, unless `force`; `create_run(claim=True)` claims a new run in its creating transaction)
    and `release`s it when it hands the run back; a claimed run takes appends from its driver
    only. Every write of a driver (append, status, release) carries its lease token; once one is
    refused because another driver took the run, the store refuses every later write of its own
    to that run with `LeaseLost` until it claims the run again. A run left "running" with no
    live lease (its driver died, stalled past its lease, or released it after a store error) is
    interrupted: `claim_next` takes it as "orphaned". The catalog keeps each run's `RunSummary`
    (what a listing shows), written with the facts when `create_run` or `append` is given one,
    so that `runs` (filtered through indexes) and `resolve` (an id or a unique prefix) never
    read the facts.
    Workers take runs that can go on with `claim_next`; a live tail sleeps in
    `wait_for_append` until something may have been recorded.
    """

    def create_run(
        self,
        run_id: str,
        task: str,
        *,
        parent_id: str | None = None,
        branch_seq: int | None = None,
        info: dict[str, Any] | None = None,
        created_at: float | None = None,
        events: Sequence[NewEvent] = (),
        status: str | None = None,
        summary: RunSummary | None = None,
        claim: bool = False,
    ) -> RunRecord: ...

    def append(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[NewEvent],
        *,
        status: str | None = None,
        durable: bool = False,
        summary: RunSummary | None = None,
    ) -> int: ...

    def claim(self, run_id: str, *, force: bool = False) -> None: ...

    def release(self, run_id: str) -> None: ...

    def claim_next(
        self, *, kinds: Sequence[str] = ("queued", "ready", "orphaned")
    ) -> RunRecord | None:
        """Atomically pick the one run that can go on and claim it for this store (as `claim`
        does), returning its record (status unchanged: the driver sets it), or None when there
        is none. "queued": status `queued` (submitted to run later); "ready": status `ready` (a
        waiting run whose human decision is recorded); "orphaned": status `running` with no
        live lease (its driver stopped renewing, or released it). Orphaned runs are taken
        first, then ready, then queued, the oldest `updated_at` first within each. A queued or
        ready run whose lease is live (someone holds it) is not taken."""
        ...

    def wait_for_append(self, timeout: float) -> bool:
        """Block up to `timeout` seconds until any run of this store may have new events
        (True; a spurious True is allowed) or the timeout passes (False). Readers then read
        with `read(run_id, after=seq)`, so they never miss or repeat an event."""
        ...

    def read(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> list[StoredEvent]: ...

    def verify(self, run_id: str) -> ChainReport: ...

    def batch(self) -> AbstractContextManager[None]: ...

    def run(self, run_id: str) -> RunRecord: ...

    def runs(
        self,
        *,
        status: str | None = None,
        model: str | None = None,
        task: str | None = None,
        since: float | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        parents: Sequence[str] | None = None,
    ) -> list[RunRecord]: ...

    def resolve(self, run_id_or_prefix: str) -> str: ...

    def set_status(self, run_id: str, status: str) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncAppend(Protocol):
    """A store whose appends can be awaited without blocking the event loop (the engine then
    uses `append_async`; with any other store it calls `append`), and which any thread may use.
    If the awaiting task is cancelled, the append is still carried out whole or not at all, and
    the cancellation is raised once it is known which: the caller's idea of the log stays true.
    """

    async def append_async(
        self,
        run_id: str,
        expected_seq: int,
        events: Sequence[NewEvent],
        *,
        status: str | None = None,
        durable: bool = False,
        summary: RunSummary | None = None,
    ) -> int: ...


@runtime_checkable
class AsyncDrive(Protocol):
    """A store whose run creation, claims and releases can be awaited without blocking the event
    loop, through the writer its appends go through (so that they share its transactions); a
    creation may claim the new run in the same transaction. As with `AsyncAppend`, a cancelled
    wait still ends with the write done whole or not at all."""

    async def create_run_async(
        self,
        run_id: str,
        task: str,
        *,
        created_at: float | None = None,
        events: Sequence[NewEvent] = (),
        status: str | None = None,
        summary: RunSummary | None = None,
        claim: bool = False,
    ) -> None: ...

    async def claim_async(self, run_id: str, *, force: bool = False) -> None: ...

    async def release_async(self, run_id: str) -> None: ...


@runtime_checkable
class Inbox(Protocol):
    """A store that takes messages for a run from anyone (a person steering it, asking it to
    stop) without appending to the run, which only its driver may do; both backends are.

    `post` queues one, numbered 1, 2, 3 ... per run in the order posted (all or nothing; any
    process may post, whether the run is driven or not; `UnknownRun` for a run the catalog
    does not have). `pending` gives the messages not taken yet, in order: cheap enough for a
    driver to ask at every step. `take` marks the run's messages up to `upto` taken, from its
    driver only (a store that has not claimed the run is refused with `ConcurrencyError`, one
    whose lease was taken over with `LeaseLost`); inside `batch()` it commits with the append
    that records what they said, or not at all."""

    def post(self, run_id: str, kind: str, payload: str) -> int: ...

    def pending(self, run_id: str) -> list[InboxMessage]: ...

    def take(self, run_id: str, upto: int) -> None: ...


@runtime_checkable
class PayloadReader(Protocol):
    """A store that reads a run's events as bare rows, (seq, kind, version, payload, meta
    text, recorded_at), nothing parsed: a reader decodes only what it needs (both backends
    are)."""

    def read_payloads(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> list[tuple[int, str, int, str, str, float]]: ...


@runtime_checkable
class Searchable(Protocol):
    """A store with full-text search over the text of its facts and a one-pass read of events
    by kind (`agentsm search` and `agentsm stats`); both backends are, with the same words
    (`eventstore.fulltext`: the string values of the payload, split on what is not a letter or
    digit after case and accent folding, so an e-mail address or a URL is found alike).

    `search` returns `(run_id, seq, kind, snippet)` for the facts holding every term of `text`
    (a word, a `"quoted phrase"`, a `prefix*`), best first: the snippet is the matching text,
    on one line, each match in `[ ]`. A store that may write first indexes what was appended
    since (`index_for_search`); the facts not in the index (`unindexed`: a read-only store's
    newest, or every fact of a log from before the index) are read one by one, slower."""

    def search(
        self, text: str, *, kinds: Sequence[str] | None = None, limit: int = 50
    ) -> list[tuple[str, int, str, str]]: ...

    def index_for_search(self) -> int: ...

    def unindexed(self) -> int: ...

    def events_of(
        self, kinds: Sequence[str], *, since: float | None = None
    ) -> list[StoredEvent]: ...
