"""Idle: the entry point. The run's definition (RunStarted) is its only fact."""

from __future__ import annotations

from typing import ClassVar

from ..context import RunContext
from ..events import Event
from ..types import State


class IdleState:
    """Starts the loop: no LLM, no tools, always `Start`."""

    name: ClassVar[str] = State.Idle
    emits: ClassVar[frozenset[str]] = frozenset({Event.Start})

    async def handle(self, ctx: RunContext) -> str:
        return Event.Start

    def __repr__(self) -> str:
        return "IdleState()"
