"""What the API shows of threads and turns, from the catalog (and, for a thread in full, its
conversation and what its last turn waits for): the response models, filled."""

from __future__ import annotations

from collections.abc import Sequence

from agentsm.threads import ThreadSummary, thread_mark, thread_messages
from agentsm.types import ApprovalRequest
from eventstore import EventStore, RunRecord

from .events import EndEvent, Event, request_events
from .models import PendingRequest, ThreadDetail, ThreadInfo, ThreadMessage, TurnInfo

__all__ = [
    "empty_thread",
    "standing_events",
    "thread_detail",
    "thread_info",
    "thread_of",
    "turn_info",
    "turn_of",
]


def thread_info(summary: ThreadSummary, driving: bool) -> ThreadInfo:
    """A thread as the catalog shows it (`driving`: a turn of it is under way here)."""
    last = summary.last
    return ThreadInfo(
        thread_id=summary.thread_id,
        turns=summary.turns,
        status=last.shown_status,
        last_run=last.run_id,
        last_message=last.task,
        last_answer=last.summary.answer,
        last_error=last.summary.error,
        updated_at=last.updated_at,
        branched_from=summary.branched_from,
        branch_turn=summary.branch_turn,
        driving=driving,
    )


def empty_thread(thread_id: str, started_at: float | None) -> ThreadInfo:
    """A thread started here that has no turn yet."""
    return ThreadInfo(
        thread_id=thread_id,
        turns=0,
        status=None,
        last_run=None,
        last_message=None,
        last_answer=None,
        last_error=None,
        updated_at=started_at,
        driving=False,
    )


def thread_detail(
    store: EventStore,
    info: ThreadInfo,
    turns: Sequence[RunRecord],
    waiting: Sequence[ApprovalRequest],
) -> ThreadDetail:
    """A thread in full: its turns, the conversation, and what its last turn waits for."""
    said = thread_messages(store, [r.run_id for r in turns]) if turns else []
    return ThreadDetail(
        **info.model_dump(),
        runs=[turn_info(r) for r in turns],
        messages=[ThreadMessage(**m) for m in said],
        pending=[
            PendingRequest(
                kind=r.kind,
                call_id=r.call.id,
                name=r.call.name,
                args=dict(r.call.args),
                reason=r.reason,
            )
            for r in waiting
        ],
    )


def turn_info(record: RunRecord) -> TurnInfo:
    """One turn: its run, as the catalog shows it."""
    s = record.summary
    return TurnInfo(
        run_id=record.run_id,
        turn=turn_of(record),
        status=record.shown_status,
        task=record.task,
        answer=s.answer,
        error=s.error,
        steps=s.steps,
        input_tokens=s.input_tokens,
        output_tokens=s.output_tokens,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def standing_events(
    thread_id: str, record: RunRecord, waiting: Sequence[ApprovalRequest]
) -> list[Event]:
    """How a turn stands, as the events after a stream's `run`: what it waits for, then its
    `end` (with the start of its answer or error, as the catalog keeps them)."""
    status = record.shown_status
    end = EndEvent(
        thread_id=thread_id,
        run_id=record.run_id,
        status=status,
        answer=record.summary.answer if status == "done" else None,
        error=record.summary.error if status in ("failed", "aborted") else None,
    )
    return [*request_events(waiting), ("end", end)]


def turn_of(record: RunRecord) -> int:
    """The turn's number in its thread (0 for a run that is no turn)."""
    mark = thread_mark(record)
    return int(mark["turn"]) if mark else 0


def thread_of(record: RunRecord) -> str:
    """The id of the turn's thread ("" for a run that is no turn)."""
    mark = thread_mark(record)
    return str(mark["id"]) if mark else ""
