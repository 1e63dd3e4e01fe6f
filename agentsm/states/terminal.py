"""Done and Error: terminal states that record the run's closing fact and nothing else."""

from __future__ import annotations

from typing import ClassVar

from .. import facts as f
from ..context import RunContext
from ..events import Event
from ..types import State


class DoneState:
    """Records RunFinished with the final answer."""

    name: ClassVar[str] = State.Done
    emits: ClassVar[frozenset[str]] = frozenset()

    async def handle(self, ctx: RunContext) -> str:
        ctx.record(f.RunFinished(status="done", final_answer=ctx.memory.final_answer))
        return Event.Start

    def __repr__(self) -> str:
        return "DoneState()"


class ErrorState:
    """Records RunFinished with the error (or "Unknown error")."""

    name: ClassVar[str] = State.Error
    emits: ClassVar[frozenset[str]] = frozenset()

    async def handle(self, ctx: RunContext) -> str:
        ctx.record(f.RunFinished(status="failed", error=ctx.memory.error or "Unknown error"))
        return Event.Start

    def __repr__(self) -> str:
        return "ErrorState()"
