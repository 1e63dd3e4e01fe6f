"""Resume a run that stopped without finishing, and record a human's decision on a waiting run."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

from agentsm import AgentEngine, AgentFailed, State
from agentsm import facts as f
from agentsm.memory import AgentMemory, fold_with_state
from agentsm.questions import handler_question
from agentsm.recorder import Recorder
from agentsm.states.waiting import approval_requests, human_requests
from agentsm.subagent import with_waiting_children
from agentsm.tools import Tool, ToolRegistry
from agentsm.types import ApprovalRequest
from eventstore import Driver, EventStore

from .branching import judged
from .errors import BestOfError
from .recording import Recording
from .source import Builder, StoreLike, agent_of, opened, resolve_run

__all__ = [
    "Around",
    "continue_claimed",
    "decide",
    "pending_requests",
    "resume_run",
    "waiting_call",
]

Around = Callable[[AgentEngine], AbstractContextManager[object]]
"""What wraps a worker's engine while it runs: `around(engine)` gives a context manager."""


def resume_run(db: StoreLike, run_id: str, builder: Builder, *, force: bool = False) -> str:
    """Continue a run from its log with the user's agent (`builder(task)`: its LLM, tools,
    table and handlers) and return the final answer.

    A run that waited for a human continues with the recorded decision (or asks the builder's
    callback). A run whose process died continues from its last complete transition; a tool that
    was running then is re-run if idempotent, and otherwise waits for a human to say whether it
    took effect. A finished run returns its answer (or raises AgentFailed) without running.
    A run that another live process drives is refused (`RunInUse`, naming its host and pid)
    unless `force`; the superseded process can then append nothing more, and a call it had
    under way is asked about only once its lease and the call's timeout have run out (see
    `continue_claimed`).
    """
    with opened(db) as store:
        run_id = resolve_run(store, run_id)
        before = store.run(run_id)
        store.claim(run_id, force=force)  # before reading: the log cannot move on under us
        try:
            previous = (before.driver, before.lease_until) if before.driver else None
            return continue_claimed(store, run_id, builder, previous=previous)
        finally:
            store.release(run_id)  # whatever happened: a failed resume does not keep the run


def continue_claimed(
    store: EventStore,
    run_id: str,
    builder: Builder,
    *,
    around: Around | None = None,
    previous: tuple[Driver, float | None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """`resume_run` of a run this store has claimed already (a worker's); the claim is kept.
    `around(engine)`, a context manager, is entered while the engine runs (live tracing).

    A call that is not idempotent and was under way when the run's previous driver (`previous`:
    the process and the end of its lease, as the catalog named them before this claim) stopped
    may still be running there, if that process lives (stalled, or on another host): before
    the question "did it take effect?" is put, this waits (`sleep`, holding the claim) until
    that driver's lease has run out and, where the call has a timeout
    (`AgentConfig.tool_timeout`), until its start plus the timeout has passed. No wait when the
    driver is known to be dead or let the run go. A process frozen inside a tool can still
    finish it when it thaws (fencing stops its writes, not its effects): the call's idempotency
    key, named in the question, lets the service at the other end refuse it twice."""
    recording = Recording.load(store, run_id)
    memory, state = fold_with_state(e.fact for e in recording.entries)
    if judged(recording):  # a best-of judgement: no agent to continue
        if recording.finished and memory.final_answer is not None:
            return memory.final_answer
        raise BestOfError(
            f"Run {recording.run_id} is a best-of judgement, not an agent run: it is not "
            f"resumed; judge its candidates again with replay.judge_again(db, "
            f"{recording.run_id!r}, judge)."
        )
    if recording.finished and state == State.Done:
        return memory.final_answer or "[No answer produced]"
    if recording.finished:
        raise AgentFailed(memory.error or "Unknown error", recording.run_id)
    agent = agent_of(store, recording.definition, builder)
    engine = agent(recording.definition.task).store(store).attach(recording.run_id)
    settled = _settled_at(recording, memory, engine.tools, previous)
    if settled > time.time():
        sleep(settled - time.time())
    with around(engine) if around is not None else nullcontext():
        return engine.run()


def _settled_at(
    recording: Recording,
    memory: AgentMemory,
    tools: ToolRegistry,
    previous: tuple[Driver, float | None] | None,
) -> float:
    """When the calls the previous driver left under way, not idempotent and not asked about
    yet, can no longer be running there (0: none is, or that driver is gone)."""
    if previous is None or previous[0].alive() is False or memory.awaiting:
        return 0.0  # let go, or dead: nothing runs there; or asked already
    unsure = [
        i
        for i in memory.interrupted()
        if not getattr(tools.get(memory.planned_calls[i].name), "idempotent", False)
    ]
    if not unsure:
        return 0.0
    settled = previous[1] or 0.0
    timeout = memory.config.tool_timeout
    if timeout is not None:
        started = [e.timestamp for e in recording.entries if isinstance(e.fact, f.ToolCallStarted)]
        settled = max(settled, (started[-1] if started else 0.0) + timeout)
    return settled


def pending_requests(db: StoreLike, run_id: str) -> list[ApprovalRequest]:
    """What a waiting run waits for a person to say: a decision on each call waiting in
    WaitingForHuman, an answer to each question (kind "question": a call of its `ask_human`
    tool, or a handler's `ctx.ask`, index -1); empty when it waits for nothing."""
    with opened(db) as store:
        recording = Recording.load(store, run_id)
        memory, state = fold_with_state(e.fact for e in recording.entries)
        return with_waiting_children(store, human_requests(recording.run_id, memory, state))


def decide(
    db: StoreLike,
    run_id: str,
    verdict: Literal["approved", "rejected", "modified"],
    *,
    args: dict[str, Any] | None = None,
    call_id: str | None = None,
    note: str = "",
    force: bool = False,
) -> list[f.Decision]:
    """Record a human's decision on a waiting run (all its waiting calls, or the one `call_id`
    names: its exact id, a unique prefix of it, or `#N`, its position among the waiting calls
    counted from 1); the run continues with `resume_run`. A modification's `args` replace all of
    the call's arguments and must fit the tool's recorded schema. Nothing runs here, and nothing
    is decided when the request is ambiguous or the arguments do not fit. Refused while another
    live process drives the run, unless `force`."""
    with opened(db) as store:
        run_id = resolve_run(store, run_id)
        store.claim(run_id, force=force)
        try:
            return _decide(store, run_id, verdict, args=args, call_id=call_id, note=note)
        finally:
            store.release(run_id)  # a no-op when the decision's commit released it already


def _decide(
    store: EventStore,
    run_id: str,
    verdict: Literal["approved", "rejected", "modified"],
    *,
    args: dict[str, Any] | None,
    call_id: str | None,
    note: str,
) -> list[f.Decision]:
    recording = Recording.load(store, run_id)
    memory, state = fold_with_state(e.fact for e in recording.entries)
    waiting = approval_requests(recording.run_id, memory)
    open_question = handler_question(recording.run_id, memory)
    if open_question is not None and (state != State.WaitingForHuman or not waiting):
        raise ValueError(
            f"Run {recording.run_id} waits for an answer to its question "
            f"{open_question.reason!r}, not for a decision: answer it (agentsm answer "
            f"{recording.run_id} TEXT)."
        )
    if state != State.WaitingForHuman or not waiting:
        raise ValueError(
            f"Run {recording.run_id} is not waiting for a human (it is in {state}); only a run "
            "in WaitingForHuman with a pending request can be approved, rejected or modified."
        )
    if call_id is not None:
        waiting = [waiting_call(recording.run_id, waiting, call_id)]
    elif verdict != "rejected":  # a question is answered, not approved
        waiting = [r for r in waiting if r.kind != "question"] or waiting
    asked = [r for r in waiting if r.kind == "question"]
    if asked and verdict != "rejected":
        raise ValueError(
            f"{asked[0].call.id} asks a person a question ({asked[0].reason!r}): answer it "
            f"(agentsm answer {recording.run_id} TEXT), or reject it to decline."
        )
    if verdict == "modified":
        if args is None:
            raise ValueError("modify needs the replacement arguments (--args JSON).")
        if len(waiting) > 1:
            raise ValueError(
                f"{len(waiting)} calls are waiting; name the one to modify with --call."
            )
        _check_args(recording.definition, waiting[0].call.name, args)
    decisions = [
        f.Decision(
            call_id=r.call.id,
            verdict=verdict,
            args=args if verdict == "modified" else None,
            note=note,
            index=r.index,
        )
        for r in waiting
    ]
    recorder = Recorder(store, recording.run_id, memory, recording.entries[-1].seq, time.time)
    recorder.record(f.HumanDecided(decisions=tuple(decisions)), state)
    left = recorder.memory.awaiting
    recorder.flush(status="waiting" if left else "ready")
    return decisions


def _check_args(definition: f.RunStarted, name: str, args: dict[str, Any]) -> None:
    """Refuse replacement arguments the tool's recorded schema rejects, with the check the
    engine makes before it runs a call (a tool the run did not declare is left to the engine)."""
    registry = ToolRegistry()
    for schema in definition.tools:
        registry.add(Tool(schema.name, schema.description, schema.input_schema, _never))
    refusal = registry.refusal(name, args) if registry.has(name) else None
    if refusal is not None:
        problems = refusal.observation.removeprefix("ERROR: InvalidArguments: ")
        raise ValueError(
            f"The arguments given for {name} do not fit its schema ({problems}): the object "
            "given replaces all of the call's arguments; nothing was decided."
        )


def _never(args: dict[str, Any]) -> None:
    raise AssertionError("a schema check runs no tool")


def waiting_call(run_id: str, waiting: list[ApprovalRequest], name: str) -> ApprovalRequest:
    """The one waiting call `name` designates: `#N`, an exact id, or a unique id prefix."""

    def listing(requests: list[ApprovalRequest]) -> str:
        return ", ".join(f"#{waiting.index(r) + 1} {r.call.id} ({r.call.name})" for r in requests)

    if name.startswith("#") and name[1:].isdigit() and not any(r.call.id == name for r in waiting):
        n = int(name[1:])
        if not 1 <= n <= len(waiting):
            raise ValueError(
                f"Run {run_id} has {len(waiting)} waiting call(s); {name} is not one of them "
                f"(calls are numbered among those still waiting): waiting: {listing(waiting)}."
            )
        return waiting[n - 1]
    matches = [r for r in waiting if r.call.id == name] or [
        r for r in waiting if name and r.call.id.startswith(name)
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ValueError(f"Run {run_id} has no waiting call {name!r}; waiting: {listing(waiting)}.")
    raise ValueError(
        f"--call {name!r} names {len(matches)} waiting calls of run {run_id} ({listing(matches)}); "
        "nothing was decided: give a whole id, or #N for the N-th waiting call."
    )
