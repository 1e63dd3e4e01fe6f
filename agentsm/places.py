"""Facts that name what memory holds by its place in the step, given in full or as stored.

The log writes a tool call its place names, a plan of the plan response's very calls and the
history entries the step's results make without writing them again (`as_stored`); every
reader gets them back in full from the memory just before the fact (`in_full`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import facts as f
from .frozen import same_json
from .types import HistoryEntry

if TYPE_CHECKING:
    from .memory import AgentMemory

__all__ = ["as_stored", "committed_entries", "in_full", "result_places"]


def in_full(fact: Any, memory: AgentMemory) -> Any:
    """The fact with what it names by place given in full, from `memory`, the memory just
    before it: a ToolCallStarted or ToolExecuted with both its place (`index`) and its `call`
    (a log from before version 2 wrote the call and left its place to the fold), a
    ToolCallsPlanned with the plan response's calls, an ObservationCommitted with every entry
    its results make; any other fact as it is."""
    fill = _IN_FULL.get(type(fact))
    return fact if fill is None else fill(fact, memory)


def _plan_in_full(fact: f.ToolCallsPlanned, memory: AgentMemory) -> Any:
    if fact.calls is not None:
        return fact
    update: dict[str, Any] = {"calls": memory.offered_calls, "text": memory.offered_text}
    if memory.offered_reasoning:
        update["reasoning"] = memory.offered_reasoning
    return fact.model_copy(update=update)


def _observation_in_full(fact: f.ObservationCommitted, memory: AgentMemory) -> Any:
    if fact.results is None:
        return fact
    made = committed_entries(memory, fact.results)
    return fact.model_copy(update={"entries": (*(fact.entries or ()), *made), "results": None})


def _call_in_full(fact: f.ToolCallStarted | f.ToolExecuted, memory: AgentMemory) -> Any:
    if fact.index is not None:
        if fact.call is not None:
            return fact
        call = memory.call_at(fact.index)
        return fact if call is None else fact.model_copy(update={"call": call})
    if fact.call is None:
        return fact
    planned = len(memory.planned_calls)
    place: int | None
    if isinstance(fact, f.ToolCallStarted):
        position = memory.start_position(fact.call)
        place = position if position is not None else memory.next_place()
    else:
        position = memory.result_position(fact.call)
        own = next((k for k, c in enumerate(memory.own_calls) if c == fact.call), None)
        place = position if position is not None else None if own is None else planned + own
    return fact if place is None else fact.model_copy(update={"index": place})


def committed_entries(memory: AgentMemory, places: Iterable[int]) -> tuple[HistoryEntry, ...]:
    """The history entries the step's results at `places` become, in that order: each
    result's call and observation, the plan's text and reasoning on the first (what Observing
    commits)."""
    by_place = {r.index: r for r in memory.results}
    text = memory.planned_text
    reasoning = memory.planned_reasoning
    made = []
    for place in places:
        result = by_place.get(place)
        if result is None:
            raise ValueError(
                f"ObservationCommitted names the result at place {place}, and there is none"
            )
        made.append(
            HistoryEntry(
                step=memory.step,
                tool=result.call,
                observation=result.observation,
                success=result.success,
                text=text,
                reasoning=reasoning,
                images=result.images,
            )
        )
        text, reasoning = None, ()
    return tuple(made)


def result_places(memory: AgentMemory) -> tuple[int, ...]:
    """The places of the planned calls that have a result, in the plan's order: the results
    Observing moves into history."""
    done = {r.index for r in memory.results}
    return tuple(i for i in range(len(memory.planned_calls)) if i in done)


def as_stored(fact: Any, memory: AgentMemory) -> Any:
    """The fact as the log writes it, given `memory` just before it (the inverse of
    `in_full`): a call its place names, a plan of the plan response's very calls, and
    history entries the step's results make are left out."""
    leave = _AS_STORED.get(type(fact))
    return fact if leave is None else leave(fact, memory)


def _call_as_stored(fact: f.ToolCallStarted | f.ToolExecuted, memory: AgentMemory) -> Any:
    if (
        fact.index is not None
        and fact.call is not None
        and (isinstance(fact, f.ToolExecuted) or fact.index < len(memory.planned_calls))
        and memory.call_at(fact.index) == fact.call
    ):
        return fact.model_copy(update={"call": None})
    return fact


def _plan_as_stored(fact: f.ToolCallsPlanned, memory: AgentMemory) -> Any:
    offered = memory.offered_calls
    if (
        fact.calls
        and (fact.calls is offered or same_json(fact.calls, offered))
        and fact.text == memory.offered_text
        and same_json(fact.reasoning or (), memory.offered_reasoning)
    ):
        return fact.model_copy(update={"calls": None, "text": None, "reasoning": None})
    return fact


def _observation_as_stored(fact: f.ObservationCommitted, memory: AgentMemory) -> Any:
    if fact.results is not None:
        return fact
    entries, places = fact.entries or (), result_places(memory)
    kept = len(entries) - len(places)
    if places and kept >= 0 and same_json(entries[kept:], committed_entries(memory, places)):
        return fact.model_copy(update={"entries": entries[:kept] or None, "results": places})
    return fact


_IN_FULL: dict[type, Any] = {
    f.ToolCallStarted: _call_in_full,
    f.ToolExecuted: _call_in_full,
    f.ToolCallsPlanned: _plan_in_full,
    f.ObservationCommitted: _observation_in_full,
}
_AS_STORED: dict[type, Any] = {
    f.ToolCallStarted: _call_as_stored,
    f.ToolExecuted: _call_as_stored,
    f.ToolCallsPlanned: _plan_as_stored,
    f.ObservationCommitted: _observation_as_stored,
}
"""The facts that name what memory holds, by their exact type (facts are final classes)."""
