"""Threads as the web viewer shows them: the list of conversations (the columns of `agentsm
threads`), and one thread as a conversation, turn by turn, each turn with its run, its status,
what was said while it ran (steering, questions and answers, decisions, stops) and what it
waits on, where the thread came from and the threads branched from it."""

from __future__ import annotations

import json
from typing import Any

from agentsm import facts as f
from agentsm.questions import question_of
from agentsm.threads import ENDED, ThreadSummary, thread_mark, threads
from eventstore import EventStore, RunRecord

from ..recording import Recording
from ..threads import turns_of
from .views import waiting_of

__all__ = ["thread_detail", "thread_list", "thread_record"]


def thread_record(t: ThreadSummary) -> dict[str, Any]:
    """A thread as `agentsm threads --json` gives it: its turns, its last turn's run, status,
    message (`task`), answer and error, when it was updated, and the thread and turn it was
    branched from."""
    last = t.last
    return {
        "thread_id": t.thread_id,
        "turns": t.turns,
        "status": last.shown_status,
        "last_run": last.run_id,
        "task": last.task,
        "answer": last.summary.answer,
        "error": last.summary.error,
        "updated_at": last.updated_at,
        "branched_from": t.branched_from,
        "branch_turn": t.branch_turn,
    }


def thread_list(store: EventStore) -> list[dict[str, Any]]:
    """Every thread of the log, the last updated first, read from the catalog alone."""
    return [thread_record(t) for t in reversed(threads(store))]


def _args(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False, sort_keys=True)


def _said_during(recording: Recording) -> list[dict[str, Any]]:
    """What people said to the turn while it ran, and what it asked them, in order: steering
    messages, questions and their answers, decisions on calls, stops."""
    said: list[dict[str, Any]] = []
    groups = iter(recording.decision_groups)
    for e in recording.entries:
        fact = e.fact
        if isinstance(fact, f.Steered):
            said.append({"seq": e.seq, "kind": "steer", "text": fact.text})
        elif isinstance(fact, f.QuestionAsked):
            said.append({"seq": e.seq, "kind": "question", "text": fact.question})
        elif isinstance(fact, f.HumanAnswered):
            said.append({"seq": e.seq, "kind": "answer", "text": fact.answer})
        elif isinstance(fact, f.StopRequested):
            said.append({"seq": e.seq, "kind": "stop", "text": fact.reason})
        elif isinstance(fact, f.HumanDecided):
            for effect in next(groups, ()):
                decision, call = effect.decision, effect.call
                if decision.verdict == "answered":
                    asked = question_of(call) if call is not None else decision.call_id
                    said.append({"seq": e.seq, "kind": "question", "text": asked})
                    said.append({"seq": e.seq, "kind": "answer", "text": decision.answer or ""})
                    continue
                name = f"{call.name}({_args(call.args)})" if call else decision.call_id
                text = f"{decision.verdict} {name}"
                if decision.verdict == "modified":
                    text += f" to {_args(decision.args)}"
                if decision.note:
                    text += f": {decision.note}"
                said.append({"seq": e.seq, "kind": "decision", "text": text})
    return said


def _calls(recording: Recording) -> list[dict[str, Any]]:
    """The tools the turn ran (questions to a person aside), each with its outcome."""
    asking = set(recording.definition.questions or ())
    return [
        {"seq": e.seq, "name": fact.call.name, "args": fact.call.args, "success": fact.success}
        for e in recording.entries
        if isinstance(fact := e.fact, f.ToolExecuted)
        and fact.call is not None
        and fact.call.name not in asking
    ]


def _ending(recording: Recording) -> tuple[str | None, str | None]:
    """The turn's answer, or the error that ended it (both None while it has not ended)."""
    last = recording.entries[-1].fact if recording.entries else None
    if isinstance(last, f.RunFinished):
        if last.status == "done":
            return last.final_answer or "", None
        return None, last.error or "Unknown error"
    if isinstance(last, f.RunAborted):
        return None, f"{last.error_type}: {last.message}"
    return None, None


def _turn(store: EventStore, record: RunRecord, thread_id: str, n: int) -> dict[str, Any]:
    """One turn: the message, what was said while it ran, the answer or error, and, for a
    turn that has not ended, its state and what it waits on (its log read and checked)."""
    recording = Recording.load(store, record.run_id)
    mark = thread_mark(record) or {}
    definition = recording.definition
    answer, error = _ending(recording)
    status = record.shown_status
    state, waiting = ("", []) if status in ENDED else waiting_of(store, recording)
    summary = record.summary
    return {
        "turn": n,
        "run_id": record.run_id,
        "thread_id": mark.get("id", thread_id),
        "shared": mark.get("id", thread_id) != thread_id,
        "status": status,
        "state": state,
        "message": definition.task,
        "images": [image.model_dump(mode="json") for image in definition.images or ()],
        "during": _said_during(recording),
        "calls": _calls(recording),
        "answer": answer,
        "error": error,
        "waiting": waiting,
        "steps": summary.steps,
        "tokens": summary.input_tokens + summary.output_tokens,
        "model": summary.model,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "last_seq": record.last_seq,
        "parent_id": record.parent_id,
        "branch_seq": record.branch_seq,
    }


def thread_detail(store: EventStore, thread_id: str) -> dict[str, Any]:
    """One thread as a conversation: its catalog entry (`thread`, as the list gives it), its
    turns in order (a branched thread's first ones are those it shares with the thread it
    came from, `shared`), and the threads branched from it (`branches`: at which turn, with
    which message); `UnknownThread` when the log holds none."""
    records = turns_of(store, thread_id)
    found = threads(store)
    own = next(t for t in found if t.thread_id == thread_id)
    branches = []
    for t in found:
        if t.branched_from != thread_id or t.branch_turn is None:
            continue
        first = turns_of(store, t.thread_id)[t.branch_turn - 1]
        branches.append({**thread_record(t), "at_turn": t.branch_turn, "message": first.task})
    branches.sort(key=lambda b: (b["at_turn"], b["updated_at"]))
    return {
        "thread": thread_record(own),
        "turns": [_turn(store, r, thread_id, n) for n, r in enumerate(records, 1)],
        "branches": branches,
    }
