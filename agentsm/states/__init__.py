"""The built-in state handlers, one small module each, and the AgentState protocol."""

from __future__ import annotations

from .acting import ActingState, ParallelActingState
from .base import AgentState
from .idle import IdleState
from .observing import ObservingState
from .planning import PlanningState
from .reflecting import COMPRESSION_PROMPT, ReflectingState
from .terminal import DoneState, ErrorState
from .waiting import WaitingForHumanState

__all__ = [
    "COMPRESSION_PROMPT",
    "ActingState",
    "AgentState",
    "DoneState",
    "ErrorState",
    "IdleState",
    "ObservingState",
    "ParallelActingState",
    "PlanningState",
    "ReflectingState",
    "WaitingForHumanState",
    "default_handlers",
]


def default_handlers() -> dict[str, AgentState]:
    """A fresh handler for each of the nine built-in states."""
    handlers: list[AgentState] = [
        IdleState(),
        PlanningState(),
        ActingState(),
        ParallelActingState(),
        WaitingForHumanState(),
        ObservingState(),
        ReflectingState(),
        DoneState(),
        ErrorState(),
    ]
    return {h.name: h for h in handlers}
