"""Which events the handlers really return during generated runs, checked against the table
and against each handler's declared `emits` (declarations are checked, not trusted)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..context import Suspend
from ..states.base import AgentState
from ..types import TERMINAL_STATES

if TYPE_CHECKING:
    from ..context import RunContext
    from ..engine import AgentEngine

__all__ = ["Returned", "declared_emits", "event_problems", "watch_handlers"]

Returned = list[tuple[str, str]]
"""(state, event) for every event a handler returned, in order."""


def declared_emits(handler: Any) -> frozenset[str] | None:
    """The events a handler declares it may return, or None when it declares none (a function
    handler, or an `emits` left empty), so that it can only be checked by running it."""
    emits = getattr(handler, "emits", None)
    if not emits:
        return None
    return frozenset(str(e) for e in emits)


class _Watched:
    """A handler that notes each event it returns, and otherwise is the handler itself."""

    def __init__(self, handler: AgentState, returned: Returned) -> None:
        self.handler = handler
        self.name = handler.name
        self.emits: frozenset[str] = getattr(handler, "emits", frozenset())
        self._returned = returned

    async def handle(self, ctx: RunContext) -> str | Suspend:
        event = await self.handler.handle(ctx)
        if not isinstance(event, Suspend) and ctx.state not in TERMINAL_STATES:  # ends the run
            self._returned.append((str(ctx.state), str(event)))
        return event

    def __repr__(self) -> str:
        return f"<watched {self.handler!r}>"


def watch_handlers(engine: AgentEngine) -> Returned:
    """Wrap every handler of an engine (before it runs) so that the events they return are
    noted; returns the list they are noted in."""
    returned: Returned = []
    engine.handlers = {
        state: _Watched(handler, returned)  # type: ignore[misc]
        for state, handler in engine.handlers.items()
    }
    return returned


def event_problems(
    returned: Iterable[tuple[str, str]],
    table: Mapping[tuple[str, str], str],
    handlers: Mapping[str, Any],
) -> list[str]:
    """One sentence per (state, event) a handler returned that has no row from its state, or
    that its handler's declared `emits` does not list."""
    problems: list[str] = []
    for state, event in dict.fromkeys(returned):
        if (state, event) not in table:
            problems.append(
                f"the handler of {state} returned {event}, but the table has no row "
                f"({state}, {event}): add the row, or return an event the table accepts"
            )
        handler = handlers.get(state)
        declared = declared_emits(getattr(handler, "handler", handler))
        if declared is not None and event not in declared:
            problems.append(
                f"the handler of {state} returned {event}, which its declared emits "
                f"({', '.join(sorted(declared))}) does not list: add {event} to its emits"
            )
    return problems
