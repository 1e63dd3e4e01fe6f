"""The recorder: appends a run's facts to the store and applies them to memory, nothing else."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from eventstore import EventStore, NewEvent, StoreError

from .catalog import summary_of
from .codec import value_problem
from .errors import OwnershipViolation, UnrecordableFact
from .facts import FACTS, OWNERS, Fact
from .memory import AgentMemory, apply
from .redaction import Redactor
from .types import State, ToolCall

__all__ = ["Recorder", "encode_meta"]

_BUILTIN = frozenset(State)


def encode_meta(state: str, step: int, metrics: dict[str, Any] | None = None) -> str:
    """The envelope metadata of a fact as JSON text: the state that recorded it, the step, and
    measurements (which replay does not compare)."""
    meta = f'{{"state": {json.dumps(str(state))}, "step": {step}'
    return meta + (f', "metrics": {json.dumps(metrics)}}}' if metrics else "}")


class Recorder:
    """Buffers the facts of one handler call and commits them in one transaction.

    `record` checks ownership, applies the fact to memory through the reducer and buffers it;
    `flush` appends the buffer (with the run's status) atomically.
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
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.memory = memory
        self.seq = seq
        self.clock = clock
        self.redactor = redactor
        self._pending: list[NewEvent] = []
        self._claimed = False  # whether this recorder's store drives the run (see flush)
        self.observers: list[Callable[[int, str, Fact, AgentMemory], None]] = []

    def record(self, fact: Fact, state: str, metrics: dict[str, Any] | None = None) -> None:
        """Redact `fact` (with the agent's hooks), apply it to memory and buffer it for the
        next commit; a fact that would not read back as written raises `UnrecordableFact` and
        changes nothing."""
        if self.redactor is not None:
            fact = self.redactor.fact(fact)
        owners = OWNERS.get(fact.kind)
        if owners is not None and state in _BUILTIN and state not in owners:
            raise OwnershipViolation(state, fact.kind, owners)
        payload = FACTS.encode(fact)
        problem = value_problem(metrics, "metrics") if metrics else None
        if problem:
            raise UnrecordableFact(fact.kind, problem)
        self.memory = apply(self.memory, fact)
        meta = encode_meta(state, self.memory.step, metrics)
        self._pending.append(
            NewEvent(fact.kind, payload, meta, self.clock(), FACTS.version(fact.kind))
        )
        for observer in self.observers:
            observer(self.seq + len(self._pending), state, fact, self.memory)

    def reveal(self, call: ToolCall, ordinal: int = 0) -> ToolCall:
        """The call with the real arguments its recorded (redacted) form stands for."""
        return self.redactor.reveal(call, ordinal) if self.redactor is not None else call

    @property
    def pending(self) -> int:
        """Facts recorded but not yet committed."""
        return len(self._pending)

    def create(self, task: str, *, created_at: float, status: str, claim: bool = True) -> None:
        """Add the run to the catalog with the buffered facts in one transaction, so that no
        reader sees the run before its first facts and a crash leaves no empty run; then drive
        it (`claim`), unless it is left for a worker."""
        self.store.create_run(
            self.run_id,
            task,
            created_at=created_at,
            events=self._pending,
            status=status,
            summary=summary_of(self.memory),
        )
        self.seq = len(self._pending)
        self._pending.clear()
        if claim:
            self.store.claim(self.run_id)
            self._claimed = True

    def flush(self, status: str | None = None, *, effect: bool = False) -> None:
        """Commit the buffered facts (and the status) in one transaction. The commit is durable
        (on disk first, under `durability="full"`) when an effect follows it, or when a status
        other than running hands the run back to its caller."""
        if not self._pending and status is None:
            return
        handed_back = status not in (None, "running")
        if not self._claimed:  # refused while another live process drives the run
            self.store.claim(self.run_id)
            self._claimed = True
        self.seq = self.store.append(
            self.run_id,
            self.seq,
            self._pending,
            status=status,
            durable=effect or handed_back,
            summary=summary_of(self.memory),
        )
        self._pending.clear()
        if handed_back:
            self.release()

    def release(self) -> None:
        """Stop driving the run (if this recorder's store drives it): another process may
        resume it from now on."""
        if self._claimed:
            self._claimed = False
            try:
                self.store.release(self.run_id)
            except StoreError:
                pass  # the record of this process stays until it exits: only a takeover waits
