"""Planning: guard the step budget, ask the LLM, and decide what its answer leads to."""

from __future__ import annotations

from typing import ClassVar

from .. import facts as f
from ..context import UNRECORDABLE, RunContext
from ..events import Event
from ..types import HistoryEntry, LlmResponse, State
from ..window import estimate_request


class PlanningState:
    """Guard max steps and the token budget, then increment the step and call the LLM."""

    name: ClassVar[str] = State.Planning
    emits: ClassVar[frozenset[str]] = frozenset(
        {
            Event.LlmToolCall,
            Event.LlmParallelToolCalls,
            Event.LlmFinalAnswer,
            Event.MaxSteps,
            Event.LowConfidence,
            Event.AnswerTooShort,
            Event.ToolBlacklisted,
            Event.HumanApprovalRequired,
            Event.BudgetExceeded,
            Event.FatalError,
            Event.ContextFull,
            Event.InputRejected,
            Event.HookAborted,
        }
    )

    async def handle(self, ctx: RunContext) -> str:
        memory, config = ctx.memory, ctx.config
        if memory.step >= config.max_steps:
            ctx.record(
                f.RunFailed(
                    reason="max_steps",
                    message=f"Reached max_steps={config.max_steps} without a final answer.",
                )
            )
            return Event.MaxSteps
        if ctx.over_budget():
            assert memory.budget is not None
            ctx.record(
                f.RunFailed(
                    reason="budget",
                    message=(
                        f"Token budget exhausted: {memory.total_usage.total_tokens} of "
                        f"{memory.budget.max_total_tokens} tokens used before step "
                        f"{memory.step + 1}."
                    ),
                )
            )
            return Event.BudgetExceeded
        if await ctx.check_input():  # the user's new messages, before any LLM sees them
            return Event.InputRejected
        if config.context_window is not None:
            full = self._context_full(ctx)
            if full is not None:
                return full
        if await ctx.turn_hook("before_turn"):
            return Event.HookAborted
        ctx.record(f.StepStarted(step=memory.step + 1))
        outcome = await ctx.call_llm("plan")
        if isinstance(outcome, f.LlmFailed) and outcome.error_type == UNRECORDABLE:
            ctx.record(
                f.AnswerRejected(
                    content="",
                    reason=f"the response could not be recorded ({outcome.message})",
                )
            )
            return Event.AnswerTooShort
        if isinstance(outcome, f.LlmFailed):
            ctx.record(
                f.RunFailed(
                    reason="llm_error",
                    message=f"LLM call failed: {outcome.error_type}: {outcome.message}",
                )
            )
            return Event.FatalError
        response = outcome.response
        if response.calls:
            return self._tool_calls(ctx, response)
        return await self._final_answer(ctx, response)

    def _context_full(self, ctx: RunContext) -> str | None:
        """None when the next request fits the context window; else ContextFull (Reflecting
        compacts), or FatalError when it was compacted already, or there is no history to
        cut, and it still does not fit."""
        memory, config = ctx.memory, ctx.config
        size = estimate_request(memory, ctx.tools.schemas(), config.context_limit())
        if size.fits:
            return None
        assert size.limit is not None
        if memory.context_full is None and memory.history:
            ctx.record(
                f.ContextLimitReached(tokens=size.tokens, limit=size.limit, provider=size.provider)
            )
            return Event.ContextFull
        reserve = (
            f" ({config.context_window} less the reserve of {config.context_reserve})"
            if config.context_reserve
            else ""
        )
        why = (
            "compacting the history cannot cut enough"
            if memory.history
            else "there is no history to cut"
        )
        ctx.record(
            f.RunFailed(
                reason="context_window",
                message=(
                    f"The next request needs about {size.tokens} tokens but the context window "
                    f"holds {size.limit}{reserve}, and {why}: raise context_window, or shorten "
                    "the system prompt, the task or the tool descriptions."
                ),
            )
        )
        return Event.FatalError

    def _tool_calls(self, ctx: RunContext, response: LlmResponse) -> str:
        memory, config = ctx.memory, ctx.config
        if (
            response.confidence < config.confidence_threshold
            and memory.retry_count < config.max_retries
        ):
            ctx.record(
                f.ConfidenceLow(
                    confidence=response.confidence, threshold=config.confidence_threshold
                )
            )
            return Event.LowConfidence
        blocked = [c for c in response.calls if c.name in memory.blacklisted_tools]
        if blocked:
            names = ", ".join(sorted({c.name for c in blocked}))
            entries: list[HistoryEntry] = []
            for call in response.calls:
                if call in blocked:
                    text = (
                        f"ERROR: ToolBlacklisted: the tool '{call.name}' is not permitted in this "
                        "run; choose another tool or answer without it."
                    )
                else:
                    text = (
                        f"ERROR: NotExecuted: not run because the same response called the "
                        f"blacklisted tool(s) {names}."
                    )
                entries.append(
                    HistoryEntry(
                        step=memory.step,
                        tool=call,
                        observation=text,
                        success=False,
                        text=response.content if not entries else None,
                        reasoning=response.reasoning if not entries else (),
                    )
                )
            ctx.record(f.ToolsRejected(entries=tuple(entries)))
            return Event.ToolBlacklisted
        parallel = len(response.calls) > 1 and config.parallel_tools
        ctx.record(
            f.ToolCallsPlanned(
                calls=response.calls,
                parallel=parallel,
                text=response.content,
                reasoning=response.reasoning or None,
            )
        )
        calls = response.calls
        needs = tuple(i for i, c in enumerate(calls) if c.name in memory.approval_required)
        if needs:
            ctx.record(f.ApprovalRequested.of(calls, needs))
            return Event.HumanApprovalRequired
        return Event.LlmParallelToolCalls if parallel else Event.LlmToolCall

    async def _final_answer(self, ctx: RunContext, response: LlmResponse) -> str:
        content = response.content or ""
        minimum = ctx.config.min_answer_length
        if response.stop_reason in ("max_tokens", "length"):
            ctx.record(
                f.AnswerRejected(
                    content=content,
                    reason=f"the answer was cut off at the token limit ({response.stop_reason})",
                )
            )
            return Event.AnswerTooShort
        if len(content) < minimum:
            ctx.record(
                f.AnswerRejected(
                    content=content,
                    reason=f"answer of {len(content)} characters is shorter than {minimum}",
                )
            )
            return Event.AnswerTooShort
        if await ctx.turn_hook("after_turn", answer=content):
            return Event.HookAborted
        ctx.record(f.FinalAnswerProduced(content=content))
        return Event.LlmFinalAnswer

    def __repr__(self) -> str:
        return "PlanningState()"
