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
        if not memory.history:
            ctx.record(f.ReflectionSkipped(reason="history is empty"))
            return Event.ReflectDone
        if ctx.over_budget():
            ctx.record(f.ReflectionSkipped(reason="token budget exhausted"))
            return Event.ReflectDone
        history_json = json.dumps([e.model_dump(mode="json") for e in memory.history])
        prompt = COMPRESSION_PROMPT.format(task=memory.task, history_json=history_json)
        view = AgentMemory(task=prompt, task_type=memory.task_type, config=memory.config)
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

    def __repr__(self) -> str:
        return "ReflectingState()"
