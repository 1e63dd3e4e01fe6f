"""WaitingForHuman: ask for a decision on each call that needs approval, and an answer to each
question to a person (`AgentBuilder.ask_human`)."""

from __future__ import annotations

from typing import ClassVar

from .. import facts as f
from ..context import SUSPEND, RunContext, Suspend
from ..events import Event
from ..memory import AgentMemory
from ..questions import handler_question, question_of
from ..tool_context import call_key
from ..types import ApprovalRequest, State, ToolCall

QUESTIONS = {
    "approval": "tool requires approval",
    "outcome_unknown": (
        "this call started but never reported a result (the process stopped, or the call timed "
        "out and was abandoned): did it take effect? Approve to run it again, reject to not run "
        "it again"
    ),
}


def approval_request(
    run_id: str, memory: AgentMemory, call: ToolCall, index: int
) -> ApprovalRequest:
    """The question put to a human about the call at position `index` waiting in `memory`;
    about a call whose outcome is unknown, it names the idempotency key its effect used; for a
    question to a person (a call of an `ask_human` tool), the question itself."""
    if call.name in memory.question_tools and memory.approval_reason == "approval":
        return ApprovalRequest(
            run_id=run_id,
            step=memory.step,
            call=call,
            reason=question_of(call),
            index=index,
            kind="question",
        )
    reason = QUESTIONS.get(memory.approval_reason, memory.approval_reason)
    key = ""
    if memory.approval_reason == "outcome_unknown":
        key = call_key(run_id, memory.step, index)
        reason += f" (its idempotency key was {key}: check at the other end whether it was used)"
    return ApprovalRequest(
        run_id=run_id, step=memory.step, call=call, reason=reason, index=index, idempotency_key=key
    )


def approval_requests(run_id: str, memory: AgentMemory) -> list[ApprovalRequest]:
    """Every question a run waiting in `memory` has for a human, in the LLM's order."""
    return [
        approval_request(run_id, memory, memory.planned_calls[i], i)
        for i in sorted(memory.awaiting)
    ]


def human_requests(run_id: str, memory: AgentMemory, state: str) -> list[ApprovalRequest]:
    """Everything a run in `state` with `memory` waits for a person to say: a decision on
    each waiting call or an answer to each question (in WaitingForHuman), and the answer to
    the question a handler asked."""
    found = approval_requests(run_id, memory) if state == State.WaitingForHuman else []
    asked = handler_question(run_id, memory)
    return [*found, asked] if asked is not None else found


class WaitingForHumanState:
    """Approve, reject (a failed entry the LLM sees) or modify each call, or answer a question
    to a person (the answer is the call's result); a batch that keeps any approved call goes
    on as a batch. Every waiting call is asked about, in the LLM's order, and those decided are
    recorded together (so calls can be decided in any order); while any call has no decision,
    the run suspends. When no call is left to run (rejected or answered), HumanRejected leads to
    Observing. The event depends on memory alone, so a decision recorded later (durable
    approval) leads where a callback's would."""

    name: ClassVar[str] = State.WaitingForHuman
    emits: ClassVar[frozenset[str]] = frozenset(
        {Event.HumanApproved, Event.HumanModified, Event.HumanRejected, Event.HumanApprovedBatch}
    )

    async def handle(self, ctx: RunContext) -> str | Suspend:
        decisions = []
        for request in approval_requests(ctx.run_id, ctx.memory):
            decision = await ctx.ask_human(request)
            if decision is not None:
                decisions.append(decision)
        if decisions:  # kept even when another call has no decision yet
            ctx.record(f.HumanDecided(decisions=tuple(decisions)))
        memory = ctx.memory
        if memory.awaiting:
            return SUSPEND
        if not memory.unfinished_calls():
            return Event.HumanRejected
        if memory.parallel:
            return Event.HumanApprovedBatch
        if any(d.verdict == "modified" for d in memory.decisions):
            return Event.HumanModified
        return Event.HumanApproved

    def __repr__(self) -> str:
        return "WaitingForHumanState()"
