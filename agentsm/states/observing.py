"""Observing: commit the step's results to history; ask for reflection every N steps."""

from __future__ import annotations

from typing import ClassVar

from .. import facts as f
from ..context import RunContext
from ..events import Event
from ..memory import result_places
from ..types import State


class ObservingState:
    """Moves refusals and results (in call order) into history, then runs the `after_turn`
    hooks; no LLM, no tools."""

    name: ClassVar[str] = State.Observing
    emits: ClassVar[frozenset[str]] = frozenset(
        {Event.Continue, Event.NeedsReflection, Event.HookAborted}
    )

    async def handle(self, ctx: RunContext) -> str:
        memory = ctx.memory
        # the refusals, then the results in call order (named by their places, not rewritten)
        refused = memory.rejected or None
        ctx.record(f.ObservationCommitted(entries=refused, results=result_places(memory)))
        if await ctx.turn_hook("after_turn"):  # the step is over: its results are in history
            return Event.HookAborted
        every = ctx.config.reflect_every_n_steps
        if every > 0 and memory.step % every == 0:
            return Event.NeedsReflection
        return Event.Continue

    def __repr__(self) -> str:
        return "ObservingState()"
