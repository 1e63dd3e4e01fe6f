"""Threads: a conversation with an agent, as an ordered series of runs, one per user message.

Each message is a turn: a run of its own whose task is the message. Turn N+1 starts from what
turn N's memory ended with: its history, its summaries and notes, its parts, and the
conversation before it, with turn N's message and answer added (`HistoryEntry.message`,
`.answer`). Its `RunStarted` holds all of that (`conversation`, `parts`) and names the thread
and the turn before it (`thread`, a `ThreadTurn`), so a turn folds, replays, branches and
exports on its own. The LLM is sent the conversation before the new message
(`AgentMemory.build_messages`), and the context window and reflection cut and summarise it as
they do one run's history.

Done and Error stay terminal: a turn that failed (or was aborted) is followed like any other,
and the next turn's LLM sees that it failed and why. A turn that has not ended (it waits for a
human, runs, or stopped) takes no next message (`ThreadBusy`): decide it or resume it first.

The catalog keeps each turn's place (`RunRecord.info["thread"]`), and its parent is the turn
before it (at that turn's last seq), so that `agentsm runs --tree` shows a thread as a line and
a branched thread as a fork. A turn's run id is `THREAD-N`: two senders of turn N of one thread
cannot both record it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from eventstore import ConcurrencyError, EventStore, NewEvent, RunRecord, UnknownRun

from . import facts as f
from ._sync import run_sync
from .catalog import summary_of
from .errors import ThreadBusy
from .facts import FACTS
from .images import ImageLike, blobs_of
from .inbox import send_steer
from .memory import AgentMemory, fold_log, initial_memory
from .outputs import AgentOutput
from .reading import decode
from .recorder import encode_meta
from .types import HistoryEntry, State, ThreadTurn

if TYPE_CHECKING:
    from .builder import AgentBuilder
    from .engine import AgentEngine

__all__ = [
    "ENDED",
    "Thread",
    "ThreadSummary",
    "conversation_after",
    "thread_mark",
    "thread_messages",
    "thread_runs",
    "threads",
]

ENDED = ("done", "failed", "aborted")
"""The statuses of a turn a next message may follow."""

Make = Callable[[str], "AgentBuilder"]
"""The agent of each turn: a builder for the message (its task)."""

Images: TypeAlias = ImageLike | Iterable[ImageLike] | None
"""The images of a message: each an `Image`, its bytes, a file path or an http(s) URL."""


def thread_mark(record: RunRecord) -> dict[str, Any] | None:
    """The place of a run in its thread (its catalog `info["thread"]`: id, turn, previous...),
    None for a run that is no turn. A branch of a turn copies the turn's catalog info: the mark
    counts only where the run's parent is the turn before it, as the turn recorded it."""
    mark = record.info.get("thread") if record.info else None
    if not isinstance(mark, dict) or not isinstance(mark.get("id"), str):
        return None
    if record.parent_id != mark.get("previous") or not isinstance(mark.get("turn"), int):
        return None
    return mark


def thread_runs(store: EventStore, thread_id: str) -> list[RunRecord]:
    """The turns of a thread, in order, from the catalog alone: its last turn and the turns
    before it, followed back through `previous` (a branched thread's earlier turns are those
    it shares with the thread it came from). Empty for a thread the log does not hold; a
    turn whose predecessor is not in this log (copied alone) starts the list."""
    own = [r for r in store.runs() if (m := thread_mark(r)) is not None and m["id"] == thread_id]
    if not own:
        return []
    chain = [max(own, key=lambda r: _turn_of(r))]
    while True:
        previous = _mark(chain[-1]).get("previous")
        if not previous:
            break
        try:
            record = store.run(previous)
        except UnknownRun:
            break
        if thread_mark(record) is None:
            break
        chain.append(record)
    chain.reverse()
    return chain


def _mark(record: RunRecord) -> dict[str, Any]:
    mark = thread_mark(record)
    assert mark is not None
    return mark


def _turn_of(record: RunRecord) -> int:
    return int(_mark(record)["turn"])


@dataclass(frozen=True)
class ThreadSummary:
    """A thread as the catalog shows it: its id, how many turns, its last turn's run, and the
    thread it was branched from (at which turn), if any."""

    thread_id: str
    turns: int
    last: RunRecord
    branched_from: str | None = None
    branch_turn: int | None = None

    def __repr__(self) -> str:
        origin = f", from {self.branched_from!r}@{self.branch_turn}" if self.branched_from else ""
        return (
            f"ThreadSummary({self.thread_id!r}, turns={self.turns}, "
            f"last={self.last.run_id!r} {self.last.status}{origin})"
        )


def threads(store: EventStore) -> list[ThreadSummary]:
    """Every thread of the log, from the catalog alone (no run is read), the one whose last
    turn was updated last at the end."""
    by_thread: dict[str, list[RunRecord]] = {}
    for r in store.runs():
        mark = thread_mark(r)
        if mark is not None:
            by_thread.setdefault(mark["id"], []).append(r)
    found = []
    for thread_id, records in by_thread.items():
        last = max(records, key=_turn_of)
        first = min(records, key=_turn_of)
        origin = _mark(first).get("branched_from")
        found.append(
            ThreadSummary(
                thread_id,
                _turn_of(last),
                last,
                origin if isinstance(origin, str) else None,
                _turn_of(first) if isinstance(origin, str) else None,
            )
        )
    return sorted(found, key=lambda t: (t.last.updated_at, t.thread_id))


def conversation_after(
    memory: AgentMemory, turn: int, error: str | None = None
) -> tuple[HistoryEntry, ...]:
    """The history the turn after turn `turn` starts from, given the memory turn `turn` ended
    with: the conversation before it, its message, its own history, and its answer (or,
    with `error`, the error that ended it)."""
    history = tuple(memory.history)
    carried = memory.carried
    ending = (
        HistoryEntry.answer(turn, memory.final_answer or "")
        if error is None
        else HistoryEntry.answer(turn, error, failed=True)
    )
    message = HistoryEntry.message(turn, memory.task, memory.images)
    return (*history[:carried], message, *history[carried:], ending)


def thread_messages(store: EventStore, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The conversation of these turns: each turn's message (`role` "user", with its
    `images` if it had any) and, once it ended, its answer (`role` "assistant"; `content` None
    and the `error` for a turn that failed), each with its `turn` (from 1) and `run_id`."""
    said: list[dict[str, Any]] = []
    for n, run_id in enumerate(run_ids, 1):
        first = decode(store.read(run_id, upto=1)[0])
        assert isinstance(first, f.RunStarted)
        message = {"role": "user", "content": first.task, "turn": n, "run_id": run_id}
        if first.images:  # by digest or URL, as recorded
            message["images"] = [image.model_dump(mode="json") for image in first.images]
        said.append(message)
        record = store.run(run_id)
        last = decode(store.read(run_id, after=record.last_seq - 1)[-1])
        answer: dict[str, Any] = {"role": "assistant", "content": None, "turn": n}
        if isinstance(last, f.RunFinished) and last.status == "done":
            said.append({**answer, "content": last.final_answer, "run_id": run_id})
        elif isinstance(last, f.RunFinished):
            said.append({**answer, "run_id": run_id, "error": last.error or "Unknown error"})
        elif isinstance(last, f.RunAborted):
            error = f"{last.error_type}: {last.message}"
            said.append({**answer, "run_id": run_id, "error": error})
    return said


class Thread:
    """A conversation with an agent: `send(text)` runs the next turn and returns its answer
    (`asend` in async code, `stream` for its outputs as they happen); `runs` are the turns'
    run ids in order, `messages()` the conversation so far. Make one with
    `AgentBuilder.thread()`."""

    def __init__(
        self,
        make: Make,
        store: EventStore,
        thread_id: str,
        runs: Sequence[str] = (),
        *,
        branched_from: str | None = None,
    ) -> None:
        self._make = make
        self.store = store
        self.id = thread_id
        self._runs = list(runs)
        self._branched_from = branched_from
        self._own = 0  # turns recorded by this thread itself (not shared with its origin)
        self._engine: AgentEngine | None = None  # the engine of the turn this object runs

    @classmethod
    def of(cls, make: Make, store: EventStore, thread_id: str | None = None) -> Thread:
        """Thread `thread_id` of the log, continued from its last turn (a new thread of that id
        if the log has none), or a new thread."""
        if thread_id is None:
            return cls(make, store, uuid.uuid4().hex[:12])
        if not isinstance(thread_id, str) or not thread_id.strip():
            raise ValueError(f"A thread id is a non-empty string, not {thread_id!r}.")
        records = thread_runs(store, thread_id)
        own = [r for r in records if _mark(r)["id"] == thread_id]
        origin = _mark(own[0]).get("branched_from") if own else None
        thread = cls(
            make,
            store,
            thread_id,
            [r.run_id for r in records],
            branched_from=origin if isinstance(origin, str) else None,
        )
        thread._own = len(own)
        return thread

    @property
    def runs(self) -> tuple[str, ...]:
        """The run ids of the turns, in order (a branched thread's first ones are shared)."""
        return tuple(self._runs)

    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far, read from the log (see `thread_messages`)."""
        return thread_messages(self.store, self._runs)

    def send(self, text: str, *, images: Images = None) -> str:
        """Send a message (with `images`: each an `Image`, its bytes, a file path or a URL),
        run the turn, return its answer; `AgentFailed` if the turn fails (recorded: the thread
        goes on), `HumanInputRequired` if it waits for a human."""
        return run_sync(self.asend(text, images=images))

    async def asend(self, text: str, *, images: Images = None) -> str:
        """`send` for async code."""
        engine = self._engine = self._next_turn(text, images)
        return await engine.arun()

    async def stream(self, text: str, *, images: Images = None) -> AsyncIterator[AgentOutput]:
        """Send a message and yield the turn's outputs as they happen, as `engine.stream()`
        does (text deltas, tool calls, the final answer or the error)."""
        engine = self._engine = self._next_turn(text, images)
        async for output in engine.stream():
            yield output

    def steer(self, text: str) -> None:
        """Send a message to the turn under way, from any thread: its LLM reads it before its
        next call (`AgentEngine.steer`). A turn this object is not running (driven by another
        process, or waiting) gets it through the store (`replay.steer`); a thread whose last
        turn has ended takes the message as its next turn instead (`send`)."""
        engine = self._engine
        if engine is not None and not engine.finished and engine.run_id == self._runs[-1]:
            engine.steer(text)
            return
        if not self._runs or self.store.run(self._runs[-1]).status in ("done", "failed"):
            raise ThreadBusy(
                self.id,
                self._runs[-1] if self._runs else "",
                "no turn is under way to steer; send the message as the next turn (send)",
            )
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"A message to the agent must be a non-empty string, not {text!r}.")
        send_steer(self.store, self._runs[-1], text)

    def branch(self, at_turn: int, thread_id: str | None = None) -> Thread:
        """A new thread sharing this one's turns before `at_turn` (from 1): its first
        message, when sent, is turn `at_turn` instead of this thread's, and records where it
        came from. `at_turn` may be one past the last turn (another follow-up to the same
        conversation). Nothing is recorded until that message is sent."""
        last = len(self._runs) + 1
        if isinstance(at_turn, bool) or not isinstance(at_turn, int) or not 1 <= at_turn <= last:
            raise ValueError(
                f"Thread {self.id} has {len(self._runs)} turn(s); branch it at a turn from 1 to "
                f"{last}, not {at_turn!r}."
            )
        new_id = thread_id or uuid.uuid4().hex[:12]
        if thread_runs(self.store, new_id):
            raise ValueError(f"Thread {new_id} is in the log already; give the branch a new id.")
        return Thread(
            self._make, self.store, new_id, self._runs[: at_turn - 1], branched_from=self.id
        )

    def _next_turn(self, text: str, images: Images = None) -> AgentEngine:
        """Record the next turn's run (its definition, with what the turn before it ended
        with) and return the engine that runs it."""
        turn = len(self._runs) + 1
        run_id = f"{self.id}-{turn}"
        conversation: tuple[HistoryEntry, ...] = ()
        parts: dict[str, Any] = {}
        link = ThreadTurn(
            id=self.id, turn=turn, branched_from=None if self._own else self._branched_from
        )
        if self._runs:
            previous = self._runs[-1]
            record = self.store.run(previous)
            status = record.shown_status
            if status not in ENDED:
                raise ThreadBusy(
                    self.id,
                    previous,
                    f"its turn {turn - 1} (run {previous}) has not ended (status {status}); "
                    f"decide or resume that run first (agentsm resume {previous})",
                )
            memory, _ = fold_log(self.store, previous)
            conversation = conversation_after(memory, turn - 1, _failure(self.store, record))
            parts = dict(memory.parts)
            link = link.model_copy(update={"previous": previous, "previous_seq": record.last_seq})
        builder = self._make(text).store(self.store).run_id(run_id)
        builder._in_thread(link, conversation, parts)._with_images(images)
        definition = builder.build().definition  # as recorded: through the redaction hooks
        now = builder._clock()
        event = NewEvent(
            definition.kind,
            FACTS.encode(definition),
            encode_meta(State.Idle, 0),
            now,
            FACTS.version(definition.kind),
            blobs=blobs_of(definition.images or ()),  # stored with the turn's first fact
        )
        try:
            self.store.create_run(
                run_id,
                definition.task,
                parent_id=link.previous,
                branch_seq=link.previous_seq,
                info=link.info(),
                created_at=now,
                events=[event],
                status="created",
                summary=summary_of(initial_memory(definition)),
            )
        except ConcurrencyError:
            raise ThreadBusy(
                self.id,
                run_id,
                f"turn {turn} (run {run_id}) was sent meanwhile from elsewhere; open the thread "
                "again to continue from its last turn",
            ) from None
        self._runs.append(run_id)
        self._own += 1
        return builder.attach(run_id)

    def __repr__(self) -> str:
        origin = f", branched_from={self._branched_from!r}" if self._branched_from else ""
        last = f", last={self._runs[-1]!r}" if self._runs else ""
        return f"Thread({self.id!r}, turns={len(self._runs)}{last}{origin})"


def _failure(store: EventStore, record: RunRecord) -> str | None:
    """Why an ended turn has no answer (None: it has one)."""
    if record.status == "done":
        return None
    last = decode(store.read(record.run_id, after=record.last_seq - 1)[-1])
    if isinstance(last, f.RunFinished):
        return last.error or "Unknown error"
    if isinstance(last, f.RunAborted):
        return f"{last.error_type}: {last.message}"
    return record.summary.error or "the turn did not finish"
