"""The AgentState protocol every handler implements, and the facts a handler declares it
may record."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from ..custom import declared_records

if TYPE_CHECKING:
    from ..context import RunContext, Suspend

__all__ = ["AgentState", "Declaring", "handler_records"]


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


def handler_records(handler: Any) -> frozenset[str] | None:
    """The kinds a handler declares it may record (`records`), or None when it declares none
    (it may then record any built-in fact its state owns, and no fact of the user's)."""
    records = getattr(handler, "records", None)
    return None if records is None else declared_records(records)


class Declaring:
    """A handler with a `records` declaration added by `AgentBuilder.handler(..., records=)`;
    otherwise the handler itself."""

    def __init__(self, handler: AgentState, records: frozenset[str]) -> None:
        self.handler = handler
        self.name = handler.name
        self.emits: frozenset[str] = getattr(handler, "emits", frozenset())
        self.records = records

    async def handle(self, ctx: RunContext) -> str | Suspend:
        """The handler's own work."""
        return await self.handler.handle(ctx)

    def __repr__(self) -> str:
        return f"<{self.handler!r} records {', '.join(sorted(self.records)) or 'nothing'}>"
