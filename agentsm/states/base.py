"""The AgentState protocol every handler implements."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..context import RunContext, Suspend

__all__ = ["AgentState"]


@runtime_checkable
class AgentState(Protocol):
    """A state's behaviour: do the work through `ctx`, return the event that drives the table.

    A handler never raises for anything that is data (a tool error, a bad LLM answer): it
    records the fact and returns the matching failure event. `emits` declares the events it may
    return, so that a table can be checked against its handlers before a run. A handler may
    also declare `records`, the facts it may record (fact types or kinds): the user's own facts
    need it, and a custom state that declares it records nothing else (README "Your own facts").
    """

    name: ClassVar[str]
    emits: ClassVar[frozenset[str]]

    async def handle(self, ctx: RunContext) -> str | Suspend:
        """Do this state's work; return the next event (or SUSPEND to wait for outside input)."""
        ...
