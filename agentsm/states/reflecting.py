"""Reflecting: compress history into one `[SUMMARY]` entry with the same LLM caller."""

from __future__ import annotations

import json
from typing import ClassVar

from .. import facts as f
from ..context import RunContext
from ..events import Event
from ..memory import AgentMemory
from ..tools import ToolRegistry
from ..types import SUMMARY_TOOL, HistoryEntry, State, ToolCall
from ..window import compaction, estimate_request

COMPRESSION_PROMPT = (
    "Summarize the following tool call history into a single concise paragraph\n"
    "that preserves all key facts, findings, and data needed to continue the task.\n"
    "Task: {task}\n"
    "History: {history_json}"
)
"""The specification's exact compression prompt."""


class ReflectingState:
    """Replace history with a summary and reset the retry count; on any failure keep the
    history and carry on (reflection never fails a run)."""

    name: ClassVar[str] = State.Reflecting
    emits: ClassVar[frozenset[str]] = frozenset({Event.ReflectDone})

    async def handle(self, ctx: RunContext) -> str:
        memory = ctx.memory
        if memory.context_full is not None:
            return self._compact(ctx)
        if not memory.history:
            ctx.record(f.ReflectionSkipped(reason="history is empty"))
            return Event.ReflectDone
        if ctx.over_budget():
            ctx.record(f.ReflectionSkipped(reason="token budget exhausted"))
            return Event.ReflectDone
        view = compression_view(memory)
        limit = memory.config.context_limit()
        if limit is not None:
            size = estimate_request(view, (), limit)
            if not size.fits:
                ctx.record(
                    f.ReflectionSkipped(
                        reason=(
                            f"the summary request (about {size.tokens} tokens) would not fit the "
                            f"context window ({limit} tokens)"
                        )
                    )
                )
                return Event.ReflectDone
        outcome = await ctx.call_llm("reflect", view, ToolRegistry())
        if isinstance(outcome, f.LlmFailed):
            ctx.record(
                f.ReflectionSkipped(
                    reason=f"compression failed: {outcome.error_type}: {outcome.message}"
                )
            )
            return Event.ReflectDone
        summary = outcome.response.content or ""
        if outcome.response.calls or not summary.strip():
            ctx.record(f.ReflectionSkipped(reason="the LLM did not answer with a summary"))
            return Event.ReflectDone
        entry = HistoryEntry(
            step=memory.step,
            tool=ToolCall(name=SUMMARY_TOOL, args={}, id=f"summary-{memory.step}"),
            observation=summary,
            success=True,
        )
        ctx.record(f.HistoryCompressed(summary=entry, replaced=len(memory.history)))
        return Event.ReflectDone

    def _compact(self, ctx: RunContext) -> str:
        """The request Planning found too large: cut history by tiers (agentsm.window) so it
        fits, or say why it cannot be cut (Planning then fails the run)."""
        memory = ctx.memory
        limit = ctx.config.context_limit()
        tools = ctx.tools.schemas()
        if limit is None or estimate_request(memory, tools, limit).fits:
            ctx.record(f.ReflectionSkipped(reason="the request fits the context window now"))
            return Event.ReflectDone
        cut = compaction(memory, tools, limit)
        if cut is None:
            ctx.record(
                f.ReflectionSkipped(
                    reason="the history cannot be cut to fit the context window"
                    if memory.history
                    else "the request does not fit the context window and history is empty"
                )
            )
        else:
            ctx.record(cut)
        return Event.ReflectDone

    def __repr__(self) -> str:
        return "ReflectingState()"


def compression_view(memory: AgentMemory) -> AgentMemory:
    """What the summary request asks about: the compression prompt over the whole history."""
    history_json = json.dumps([e.model_dump(mode="json") for e in memory.history])
    prompt = COMPRESSION_PROMPT.format(task=memory.task, history_json=history_json)
    return AgentMemory(task=prompt, task_type=memory.task_type, config=memory.config)
