"""Acting and ParallelActing: run the planned calls; every failure becomes an observation."""

from __future__ import annotations

from typing import ClassVar

from .. import facts as f
from ..context import RunContext
from ..events import Event
from ..types import State


def _outcome(ctx: RunContext) -> str:
    ok = all(r.success for r in ctx.memory.results)
    return Event.ToolSuccess if ok else Event.ToolFailure


def _interrupted(ctx: RunContext, *, ran: bool = False) -> bool:
    """Calls that started and never reported (the process stopped, or the call timed out and
    was abandoned) and may not be re-run without a human: record the question and say so.
    Idempotent tools are simply run again, except right after they ran (`ran`): a call that
    came back without a known outcome (a sub-agent waiting for a human) would only do the same
    again, so a human is asked about it too."""
    calls = ctx.memory.planned_calls
    unsure = tuple(
        i
        for i in ctx.memory.interrupted()
        if ran or not getattr(ctx.tools.get(calls[i].name), "idempotent", False)
    )
    if unsure:
        ctx.record(f.ApprovalRequested.of(calls, unsure, reason="outcome_unknown"))
    return bool(unsure)


class ActingState:
    """Runs the planned calls one after another, in the LLM's order."""

    name: ClassVar[str] = State.Acting
    emits: ClassVar[frozenset[str]] = frozenset(
        {Event.ToolSuccess, Event.ToolFailure, Event.FatalError, Event.ToolOutcomeUnknown}
    )

    async def handle(self, ctx: RunContext) -> str:
        if not ctx.memory.planned_calls:
            ctx.record(
                f.RunFailed(
                    reason="no_tool_call",
                    message="Acting was entered with no planned tool call; check the table.",
                )
            )
            return Event.FatalError
        if _interrupted(ctx):
            return Event.ToolOutcomeUnknown
        await ctx.run_tools(ctx.memory.unfinished_calls(), concurrent=False)
        if _interrupted(ctx, ran=True):
            return Event.ToolOutcomeUnknown
        return _outcome(ctx)

    def __repr__(self) -> str:
        return "ActingState()"


class ParallelActingState:
    """Runs the planned calls concurrently; results are recorded in call order."""

    name: ClassVar[str] = State.ParallelActing
    emits: ClassVar[frozenset[str]] = frozenset(
        {Event.ToolSuccess, Event.ToolFailure, Event.ToolOutcomeUnknown}
    )

    async def handle(self, ctx: RunContext) -> str:
        if _interrupted(ctx):
            return Event.ToolOutcomeUnknown
        await ctx.run_tools(ctx.memory.unfinished_calls(), concurrent=True)
        if _interrupted(ctx, ran=True):
            return Event.ToolOutcomeUnknown
        return _outcome(ctx) if ctx.memory.results else Event.ToolFailure

    def __repr__(self) -> str:
        return "ParallelActingState()"
