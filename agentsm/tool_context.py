"""ToolContext: what a tool may learn about the call it serves (the run, the call, a key).

A `@tool` function that declares a parameter of type `ToolContext` gets one; the parameter is
left out of the schema the LLM sees. Its `idempotency_key` is the same each time the same
planned call runs (a re-run a human approved after a crash or a timeout included) and differs
between calls, so a service that honours idempotency keys (Stripe-style) does the work once.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["ToolContext", "call_key"]


def call_key(run_id: str, step: int, position: int) -> str:
    """The key of a planned call, from its place in the run: `RUN-STEP-POSITION` (a call's
    idempotency key, and the id of the run a sub-agent call starts)."""
    return f"{run_id}-{step}-{position}"


@dataclass(frozen=True)
class ToolContext:
    """The run and the call a tool is serving, and an idempotency key for its side effects.

    `step` and `position` place the call in the run (the planning step, its index among that
    step's calls); `call_id` is the label the LLM gave the call (not unique across a run).
    """

    run_id: str
    call_id: str
    tool: str
    step: int = 0
    position: int = 0
    idempotency_key: str = ""
    seq: int = 0
    """The seq of the call's start (`ToolCallStarted`) in the run's log (0: not known)."""

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            key = (
                call_key(self.run_id, self.step, self.position) if self.run_id else uuid.uuid4().hex
            )
            object.__setattr__(self, "idempotency_key", key)

    @classmethod
    def current(cls) -> ToolContext | None:
        """The context of the tool call running now (in a tool or a custom tool runner)."""
        return _current.get()


_current: ContextVar[ToolContext | None] = ContextVar("agentsm_tool_context", default=None)
