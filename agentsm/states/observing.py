"""Observing: commit the step's results to history; ask for reflection every N steps."""

from __future__ import annotations

from typing import ClassVar

from .. import facts as f
from ..context import RunContext
from ..events import Event
from ..types import HistoryEntry, State


class ObservingState:
    """Moves refusals and results (in call order) into history; no LLM, no tools."""

    name: ClassVar[str] = State.Observing
    emits: ClassVar[frozenset[str]] = frozenset({Event.Continue, Event.NeedsReflection})

    async def handle(self, ctx: RunContext) -> str:
        memory = ctx.memory
        by_position = {r.index: r for r in memory.results}
        entries = list(memory.rejected)
        text = memory.planned_text
        for position in range(len(memory.planned_calls)):
            result = by_position.get(position)
            if result is None:
                continue
            entries.append(
                HistoryEntry(
                    step=memory.step,
                    tool=result.call,
                    observation=result.observation,
                    success=result.success,
                    text=text,
                )
            )
            text = None
        ctx.record(f.ObservationCommitted(entries=tuple(entries)))
        every = ctx.config.reflect_every_n_steps
        if every > 0 and memory.step % every == 0:
            return Event.NeedsReflection
        return Event.Continue

    def __repr__(self) -> str:
        return "ObservingState()"
