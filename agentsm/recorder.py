"""The recorder: appends a run's facts to the store and applies them to memory, nothing else."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from eventstore import (
    AsyncAppend,
    AsyncDrive,
    EventStore,
    LeaseLost,
    NewEvent,
    RunSummary,
    StoreError,
)
from eventstore.blobs import Blob, BlobReader

from .catalog import summary_of
from .codec import UnknownFact, value_problem
from .custom import CustomFact
from .errors import OwnershipViolation, UnrecordableFact
from .facts import FACTS, OWNERS, Fact, ToolCallStarted
from .images import blobs_of, carry_data
from .memory import AgentMemory, apply, as_stored, in_full
from .redaction import Redactor
from .types import State, ToolCall

__all__ = ["RIDERS", "Recorder", "encode_meta", "ownership_violation"]

_BUILTIN = frozenset(State)

RIDERS = frozenset({"Transitioned", "StepStarted", "ToolCallsPlanned"})
"""The facts that follow from the fact recorded before them (the transition it caused, the
step it began, the shape of the plan an answer gave): written with the time of that fact and
kept in its row where the log packs facts (format 2), so a step writes the rows of its effects
and its observation only."""


_STATE_JSON: dict[str, str] = {}


def encode_meta(
    state: str,
    step: int,
    metrics: dict[str, Any] | None = None,
    *,
    custom: bool = False,
    measured: str | None = None,
) -> str:
    """The envelope metadata of a fact as JSON text: the state that recorded it, the step,
    measurements (which replay does not compare; `measured`: their text, if the caller made
    it), and whether it is one of the user's own facts (`custom`: a reader without its type
    still reads it, see `UnknownFact`)."""
    if not metrics and not custom:
        name = _STATE_JSON.get(state)
        if name is not None:
            return f'{{"state":{name},"step":{step}}}'
    name = _STATE_JSON.get(state)
    if name is None:
        name = json.dumps(str(state))
        if len(_STATE_JSON) < 1000:  # the states of the tables in use
            _STATE_JSON[state] = name
    meta = f'{{"state":{name},"step":{step}' + (',"custom":true' if custom else "")
    if not metrics:
        return meta + "}"
    text = measured or _metrics_text(metrics) or json.dumps(metrics, separators=(",", ":"))
    return f'{meta},"metrics":{text}}}'


def _metrics_text(metrics: dict[str, Any]) -> str | None:
    """Measurements that are a few finite numbers as compact JSON (None for anything else)."""
    parts = []
    for key, value in metrics.items():
        kind = type(value)
        if not (kind is int or (kind is float and math.isfinite(value))) or type(key) is not str:
            return None
        name = _STATE_JSON.get(key)
        if name is None:
            name = json.dumps(key)
            if len(_STATE_JSON) < 1000:
                _STATE_JSON[key] = name
        parts.append(f"{name}:{value!r}")
    return "{" + ",".join(parts) + "}"


def ownership_violation(
    kind: str, state: str, records: Mapping[str, frozenset[str]]
) -> OwnershipViolation | None:
    """Why `state` may not record a fact of `kind` (None: it may): a built-in state records
    only the built-in facts `OWNERS` gives it; a state whose handler declares `records`
    records only those; a user's own fact only where it is declared."""
    custom = kind not in FACTS.builtin
    owners = OWNERS.get(kind)
    if owners is not None and state in _BUILTIN and state not in owners:
        return OwnershipViolation(state, kind, owners)
    if custom or (owners is not None and state not in _BUILTIN):
        declared = records.get(state)
        if (custom or declared is not None) and kind not in (declared or ()):
            return OwnershipViolation(state, kind, owners or frozenset(), declared=declared)
    return None


class Recorder:
    """Buffers a run's facts and commits them where the log needs it: before each effect and
    at each stop (see `commit`).

    `record` checks ownership, applies the fact to memory through the reducer and buffers it;
    `commit` (or `flush`, from sync code) appends the buffer (with the run's status) atomically.
    """

    def __init__(
        self,
        store: EventStore,
        run_id: str,
        memory: AgentMemory,
        seq: int,
        clock: Callable[[], float],
        *,
        redactor: Redactor | None = None,
        records: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.store = store
        self.records = dict(records or {})
        """The facts each state's handler declares it may record (states that declare)."""
        self.run_id = run_id
        self.memory = memory
        self.seq = seq
        self.clock = clock
        self.redactor = redactor
        self._pending: list[NewEvent] = []
        self._claimed = False  # whether this recorder's store drives the run (see flush)
        self._lost: LeaseLost | None = None  # set once a commit was refused: nothing more goes
        self._status: str | None = None  # a status the next commit sets (see `driving`)
        self._async = isinstance(store, AsyncAppend)  # awaitable appends, any thread
        self._drive: AsyncDrive | None = store if isinstance(store, AsyncDrive) else None
        """The store, when its creations, claims and releases can be awaited too."""
        self._shown: RunSummary | None = None  # the summary the catalog has from this recorder
        self._last_summary: tuple[tuple[Any, ...], RunSummary] | None = None
        """The last summary made, with the values of memory it was made of."""
        self.observers: list[Callable[[int, str, Any, AgentMemory], None]] = []
        self._known: dict[tuple[type, str, str], tuple[bool, bool, int | None]] = {}
        self._bytes: dict[str, bytes] = {}  # the bytes of the run's images, by digest
        self._stored: set[str] = set()  # the digests whose blobs went with a fact already

    def record(
        self, fact: Fact | CustomFact, state: str, metrics: dict[str, Any] | None = None
    ) -> None:
        """Redact `fact` (with the agent's hooks), apply it to memory and buffer it for the
        next commit; a fact that would not read back as written raises `UnrecordableFact` and
        changes nothing."""
        images = fact.__dict__.get("images")  # not getattr: pydantic's fallback is slow
        blobs = self._blobs(images) if images else ()  # the bytes, whatever redaction does
        if self.redactor is not None:
            fact = self.redactor.fact(fact)
        kind = fact.kind
        known = self._known.get((type(fact), kind, state))
        if known is None:
            known = self._allowed(fact, state)
        custom, enveloped, version = known
        before = self.memory
        fact = as_stored(fact, before)  # what it can name by place is not written again
        memory = apply(before, fact)  # pure: dropped if the fact cannot be recorded
        step = memory.step
        payload = FACTS.encode(fact, {"state": state, "step": step} if enveloped else None)
        measured = _metrics_text(metrics) if metrics else None
        if metrics and measured is None:
            problem = value_problem(metrics, "metrics")
            if problem:
                raise UnrecordableFact(kind, problem)
        self.memory = memory
        meta = encode_meta(state, step, metrics, custom=custom, measured=measured)
        if version is None:  # an UnknownFact keeps the version it was stored at
            version = FACTS.version_of(fact)
        pending = self._pending
        if kind in RIDERS and pending:  # follows from the fact before it: kept in its row
            at = pending[-1].recorded_at
            pending.append(NewEvent(kind, payload, meta, at, version, blobs=blobs, rides=True))
        else:
            pending.append(NewEvent(kind, payload, meta, self.clock(), version, blobs=blobs))
        if blobs:
            self._stored.update(b.digest for b in blobs)
        if self.observers:
            shown = in_full(fact, before)  # what it names by place, shown in full
            for observer in self.observers:
                observer(self.seq + len(self._pending), state, shown, memory)

    def _blobs(self, images: Any) -> tuple[Blob, ...]:
        """The blobs of a fact's images (`images`) that this recorder has not stored yet;
        their bytes are kept for the run's LLM calls (`find_images`)."""
        found = []
        for blob in blobs_of(images):
            self._bytes.setdefault(blob.digest, blob.data)
            if blob.digest not in self._stored:
                found.append(blob)
        return tuple(found)

    def find_images(self, memory: AgentMemory) -> None:
        """Give the images an LLM request about `memory` sends (`images_sent`) their bytes:
        those this run recorded, else the store's blobs (a resumed run, a thread's earlier
        turns, a branch). An image found nowhere is left without them: the caller says so."""
        wanting = [i for i in memory.images_sent() if i.digest is not None and i.data is None]
        if not wanting:
            return
        missing = [i.digest for i in wanting if i.digest not in self._bytes]
        if missing and isinstance(self.store, BlobReader):
            for digest, blob in self.store.blobs([d for d in missing if d]).items():
                if blob.intact:
                    self._bytes[digest] = blob.data
        carry_data(wanting, self._bytes)

    def _allowed(self, fact: Fact | CustomFact, state: str) -> tuple[bool, bool, int | None]:
        """Whether `state` may record `fact` (raises if not): whether it is a user's own kind,
        whether its kind leaves fields to the envelope, and the version it is written at (None:
        the fact's own, an UnknownFact's). Kept per type, kind and state for this run: the
        answer depends on those alone (and registrations, which a run does not change)."""
        kind = fact.kind
        violation = ownership_violation(kind, state, self.records)
        if violation is not None:
            raise violation
        custom = kind not in FACTS.builtin  # a user's own fact: marked in its envelope
        if custom and kind not in FACTS.versions:
            raise UnrecordableFact(
                kind,
                f"{kind} is not a registered fact kind; register it with "
                f"AgentBuilder.fact({type(fact).__name__}, reducer, part=...)",
            )
        version = None if isinstance(fact, UnknownFact) else FACTS.version_of(fact)
        known = (custom, FACTS.enveloped(kind), version)
        self._known[(type(fact), kind, state)] = known
        return known

    def as_recorded(self, call: ToolCall) -> ToolCall:
        """The call as the log would hold it (through the agent's redaction hooks)."""
        if not self.redactor:
            return call
        shown = self.redactor.fact(ToolCallStarted(index=None, call=call)).call
        return shown if shown is not None else call

    def reveal(self, call: ToolCall, ordinal: int = 0) -> ToolCall:
        """The call with the real arguments its recorded (redacted) form stands for."""
        return self.redactor.reveal(call, ordinal) if self.redactor is not None else call

    def discard(self, upto: int, memory: AgentMemory) -> None:
        """Forget the facts recorded after seq `upto` and not committed yet, with memory back
        to `memory` (as it was at `upto`): what a handler stopped before its first effect
        recorded, which it records again when it runs again."""
        keep = upto - self.seq
        if not 0 <= keep <= len(self._pending):
            raise ValueError(
                f"Only facts recorded and not committed can be forgotten: seq {upto} is not "
                f"between the last committed seq {self.seq} and the last recorded {self.last}."
            )
        for event in self._pending[keep:]:
            self._stored.difference_update(blob.digest for blob in event.blobs)
        del self._pending[keep:]
        self.memory = memory

    @property
    def pending(self) -> int:
        """Facts recorded but not yet committed."""
        return len(self._pending)

    @property
    def last(self) -> int:
        """The seq of the last fact recorded, committed or not."""
        return self.seq + len(self._pending)

    def claimed(self) -> None:
        """Drive the run from this recorder's store now, if it does not yet (a write of the
        driver's alone follows: messages taken from the run's inbox)."""
        if self._lost is not None:
            raise self._lost
        if not self._claimed:
            with self._fencing():
                self.store.claim(self.run_id)
            self._claimed = True

    def driving(self) -> None:
        """The run is driven from here again: the next commit marks it running."""
        self._status = "running"

    def create(self, task: str, *, created_at: float, status: str, claim: bool = True) -> None:
        """Add the run to the catalog with the buffered facts in one transaction, so that no
        reader sees the run before its first facts and a crash leaves no empty run; then drive
        it (`claim`), unless it is left for a worker."""
        summary = summary_of(self.memory)
        creation = self._creation(created_at, status, summary)
        self.store.create_run(self.run_id, task, claim=claim, **creation)
        self._created(summary)
        self._claimed = claim

    async def acreate(self, task: str, *, created_at: float, status: str) -> None:
        """`create` for async code, off the event loop where the store allows it (through its
        writer, the claim in the same transaction, where it can)."""
        if self._drive is None:
            await self._off_loop(lambda: self.create(task, created_at=created_at, status=status))
            return
        summary = summary_of(self.memory)
        creation = self._creation(created_at, status, summary)
        await self._drive.create_run_async(self.run_id, task, claim=True, **creation)
        self._created(summary)
        self._claimed = True

    def _creation(self, created_at: float, status: str, summary: RunSummary) -> dict[str, Any]:
        """What a creation writes with the run: the buffered facts, its status and summary."""
        return {
            "created_at": created_at,
            "events": self._pending,
            "status": status,
            "summary": summary,
        }

    def _created(self, summary: RunSummary) -> None:
        """The buffered facts are the run's first, committed with `summary`."""
        self._shown = summary
        self.seq = len(self._pending)
        self._pending.clear()

    def flush(self, status: str | None = None, *, effect: bool = False) -> None:
        """`commit` from sync code (a decision recorded later, a run stopped from outside): the
        calling thread waits for the commit."""
        events, status, handed_back = self._batch(status)
        if events is None:
            return
        with self._fencing():
            if not self._claimed:  # refused while another live process drives the run
                self.store.claim(self.run_id)
                self._claimed = True
            summary = self._summary()
            self.seq = self.store.append(
                self.run_id,
                self.seq,
                events,
                status=status,
                durable=effect or handed_back,
                summary=summary,
            )
        self._shown = summary or self._shown
        del self._pending[: len(events)]
        self._status = None
        if handed_back:
            self.release()

    async def commit(self, status: str | None = None, *, effect: bool = False) -> None:
        """Commit the buffered facts (and the status) in one transaction, without blocking the
        event loop where the store allows it (the commits of concurrent runs then share
        transactions). The commit is durable (on disk first, under `durability="full"`) when an
        effect follows it, or when a status other than running hands the run back to its
        caller. Only these need a commit: the facts recorded between two effects wait for the
        next one, since after a crash they are recomputed from what was committed."""
        events, status, handed_back = self._batch(status)
        if events is None:
            return
        with self._fencing():
            await self._append(events, status, effect=effect, handed_back=handed_back)
        if handed_back:
            await self.arelease()

    async def _append(
        self, events: list[NewEvent], status: str | None, *, effect: bool, handed_back: bool
    ) -> None:
        """The append of `commit` (the run claimed first, where this recorder does not yet)."""
        if not self._claimed:  # refused while another live process drives the run
            if self._drive is not None:
                await self._drive.claim_async(self.run_id)
            else:
                await self._off_loop(lambda: self.store.claim(self.run_id))
            self._claimed = True
        durable = effect or handed_back
        summary = self._summary()
        if not self._async:
            self.seq = self.store.append(
                self.run_id, self.seq, events, status=status, durable=durable, summary=summary
            )
            self._shown = summary or self._shown
            del self._pending[: len(events)]
            self._status = None
        else:  # taken as committed meanwhile: a cancelled wait still ends with the append done
            appender: AsyncAppend = self.store  # type: ignore[assignment]
            expected, waiting, shown = self.seq, self._status, self._shown
            self.seq += len(events)
            del self._pending[: len(events)]
            self._status = None
            self._shown = summary or self._shown
            try:
                await appender.append_async(
                    self.run_id, expected, events, status=status, durable=durable, summary=summary
                )
            except asyncio.CancelledError:
                raise
            except BaseException:
                self.seq, self._status, self._shown = expected, waiting, shown
                self._pending[:0] = events
                raise

    @contextmanager
    def _fencing(self) -> Iterator[None]:
        """Remember a commit refused because another driver took the run: this recorder then
        commits nothing more, whatever it is asked (not even a closing fact)."""
        try:
            yield
        except LeaseLost as e:
            self._lost = e
            raise

    async def arelease(self) -> None:
        """`release` for async code, without blocking the event loop."""
        if self._drive is None:
            await self._off_loop(self.release)
        elif self._claimed:
            self._claimed = False
            try:
                await self._drive.release_async(self.run_id)
            except StoreError:
                pass  # as in `release`

    def _summary(self) -> RunSummary | None:
        """The run's summary for the next commit, or None when the catalog shows it already
        (written by an earlier commit of this recorder): most commits change nothing it shows."""
        memory = self.memory
        made_of = (
            memory.total_usage,
            memory.final_answer,
            memory.error,
            memory.config,
            memory.task_type,
        )
        last = self._last_summary
        if (
            last is not None
            and memory.step == last[1].steps
            and all(a is b for a, b in zip(made_of, last[0], strict=True))
        ):
            summary = last[1]  # made of the very same values: the same summary
        else:
            summary = summary_of(memory)
            self._last_summary = (made_of, summary)
        return None if summary == self._shown else summary

    def _batch(self, status: str | None) -> tuple[list[NewEvent] | None, str | None, bool]:
        """What the next commit appends (None: nothing to do), its status, and whether that
        status hands the run back."""
        if self._lost is not None:
            raise self._lost
        status = status or self._status
        if not self._pending and status is None:
            return None, None, False
        return list(self._pending), status, status not in (None, "running")

    async def _off_loop(self, work: Callable[[], None]) -> None:
        """Run store work (a claim, a release, a creation) off the event loop where the store
        may be used from any thread; inline otherwise."""
        if self._async:
            await asyncio.to_thread(work)
        else:
            work()

    def release(self) -> None:
        """Stop driving the run (if this recorder's store drives it): another process may
        resume it from now on."""
        if self._claimed:
            self._claimed = False
            try:
                self.store.release(self.run_id)
            except StoreError:
                pass  # the record of this process stays until it exits: only a takeover waits
