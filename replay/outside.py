"""What people outside a run send it, from any process: messages that steer it, answers to its
questions, and requests to stop. Only a run's driver appends to it; a run driven now hears the
steering messages and stop requests through the store's inbox (`eventstore.Inbox`) at its next
transition, and a run nobody drives gets what it can take at once: a stop (it is stopped
here) or an answer (recorded, like a human decision)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from agentsm import facts as f
from agentsm.codec import clean_text
from agentsm.inbox import send_steer, send_stop
from agentsm.memory import AgentMemory, fold_with_state
from agentsm.recorder import Recorder
from agentsm.states.waiting import human_requests
from agentsm.types import ApprovalRequest
from eventstore import EventStore, RunInUse, RunRecord

from .recording import Recording
from .resuming import waiting_call
from .source import StoreLike, opened, resolve_run

__all__ = ["Answered", "answer", "request_stop", "steer"]

ENDED = ("done", "failed")
"""The statuses of a run that takes nothing more."""


def steer(db: StoreLike, run_id: str, text: str) -> int:
    """Send a run a message from any process: its driver (this process, another one, a worker
    on another host) takes it at its next transition, records it (`Steered`), and the LLM
    reads it as a user message after the latest entries from its next call on; several are
    taken in the order sent. A run nobody drives now (waiting, queued) takes it when it goes
    on. Returns the message's number among the run's messages; a run that has ended is
    refused."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"A message to a run is a non-empty string, not {text!r}.")
    with opened(db) as store:
        run_id = resolve_run(store, run_id)
        _refuse_ended(store, run_id, "steer")
        return send_steer(store, run_id, text)


def request_stop(db: StoreLike, run_id: str, reason: str = "") -> str:
    """Stop a run from any process. A run driven now (in its own process, or by a worker on
    any host) stops at its next transition: it records `StopRequested` and its status becomes
    "stopped" ("requested" is returned); so does a run a person's answer made ready, at its
    first transition once taken up. A run nobody drives (waiting, queued, or whose driver
    died) is stopped here at once, the fact recorded ("stopped"). Either way `agentsm resume`
    goes on from there. A run that has ended is refused."""
    with opened(db) as store:
        run_id = resolve_run(store, run_id)
        record = _refuse_ended(store, run_id, "stop")
        if record.status == "stopped":
            return "stopped"
        if record.status == "ready":  # decided, about to go on: it stops at its first transition
            send_stop(store, run_id, reason)
            return "requested"
        try:
            store.claim(run_id)
        except RunInUse:  # its driver is alive: it hears the request at its next transition
            send_stop(store, run_id, reason)
            return "requested"
        try:
            recorder, state = _recorder(store, run_id)
            recorder.record(f.StopRequested(reason=clean_text(reason)), state)
            recorder.flush(status="stopped")
        finally:
            store.release(run_id)  # a no-op when the commit released it already
        return "stopped"


@dataclass(frozen=True)
class Answered:
    """An answer recorded: the question it answers, the run's status now ("ready" when
    nothing else waits: a worker or `agentsm resume` goes on), and what still waits."""

    request: ApprovalRequest
    status: str
    waiting: tuple[ApprovalRequest, ...]


def answer(
    db: StoreLike, run_id: str, text: str, *, call_id: str | None = None, force: bool = False
) -> Answered:
    """Answer a question a waiting run asked a person: a call of its `ask_human` tool, whose
    result the answer becomes, or a handler's `ctx.ask`, which returns it when the run goes on.
    With several questions waiting, `call_id` names one (its id, a unique prefix, or `#N`
    among the waiting requests); by default the first is answered. The run is "ready" once
    nothing else waits, as after a decision (`replay.decide`). Refused while another live
    process drives the run, unless `force`."""
    if not isinstance(text, str):
        raise ValueError(f"An answer is text, not {text!r}.")
    with opened(db) as store:
        run_id = resolve_run(store, run_id)
        store.claim(run_id, force=force)
        try:
            return _answer(store, run_id, text, call_id)
        finally:
            store.release(run_id)  # a no-op when the answer's commit released it already


def _answer(store: EventStore, run_id: str, text: str, call_id: str | None) -> Answered:
    recorder, state = _recorder(store, run_id)
    waiting = human_requests(run_id, recorder.memory, state)
    questions = [r for r in waiting if r.kind == "question"]
    if not questions:
        shown = (
            f"it waits for a decision on {', '.join(r.call.name for r in waiting)} "
            f"(agentsm approve or reject {run_id})"
            if waiting
            else f"it waits for nothing (it is in {state})"
        )
        raise ValueError(f"Run {run_id} asked no question that waits for an answer: {shown}.")
    request = questions[0] if call_id is None else waiting_call(run_id, waiting, call_id)
    if request.kind != "question":
        raise ValueError(
            f"{request.call.id} ({request.call.name}) waits for a decision, not an answer: "
            f"approve or reject it (agentsm approve {run_id} --call {request.call.id})."
        )
    said = clean_text(text)
    if request.index < 0:  # a handler's own question (`ctx.ask`)
        recorder.record(f.HumanAnswered(answer=said), state)
    else:
        decision = f.Decision(
            call_id=request.call.id, verdict="answered", answer=said, index=request.index
        )
        recorder.record(f.HumanDecided(decisions=(decision,)), state)
    left = tuple(human_requests(run_id, recorder.memory, state))
    status = "waiting" if left else "ready"
    recorder.flush(status=status)
    return Answered(request, status, left)


def _recorder(store: EventStore, run_id: str) -> tuple[Recorder, str]:
    """A recorder continuing the run from its log (this store holds the run), and its state."""
    recording = Recording.load(store, run_id)
    memory: AgentMemory
    memory, state = fold_with_state(e.fact for e in recording.entries)
    last = recording.entries[-1].seq if recording.entries else 0
    return Recorder(store, run_id, memory, last, time.time), state


def _refuse_ended(store: EventStore, run_id: str, what: str) -> RunRecord:
    record = store.run(run_id)
    if record.status in ENDED:
        raise ValueError(
            f"Run {run_id} has ended ({record.status}); there is nothing to {what}. In a "
            "thread, send the message as the next turn (agentsm chat --thread ...)."
        )
    return record
