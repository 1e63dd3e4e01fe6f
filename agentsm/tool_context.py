"""ToolContext: what a tool may learn about the call it serves (the run, the call, a key), and
how it tells the run's listeners how the call is going.

A `@tool` function that declares a parameter of type `ToolContext` gets one; the parameter is
left out of the schema the LLM sees. Its `idempotency_key` is the same each time the same
planned call runs (a re-run a human approved after a crash or a timeout included) and differs
between calls, so a service that honours idempotency keys (Stripe-style) does the work once.

`progress(text)` and `partial(value)` report on a long call while it runs: they reach
`engine.stream()` as `ToolProgress` and `ToolPartial` outputs, in order, before the call's
result. They are not facts: the log keeps only how many there were (the `progress` and
`partials` measurements of the call's `ToolExecuted`), so a replay, which serves the recorded
result without running the tool, is the same whether the tool reported or not.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Report", "ToolContext", "call_key"]

Report = Callable[[Literal["progress", "partial"], Any], None]
"""Where a call's reports go: `("progress", text)` or `("partial", value)`."""


def call_key(run_id: str, step: int, position: int) -> str:
    """The key of a planned call, from its place in the run: `RUN-STEP-POSITION` (a call's
    idempotency key, and the id of the run a sub-agent call starts)."""
    return f"{run_id}-{step}-{position}"


@dataclass(frozen=True)
class ToolContext:
    """The run and the call a tool is serving, and an idempotency key for its side effects.

    `step` and `position` place the call in the run (the planning step, its index among that
    step's calls); `call_id` is the label the LLM gave the call (not unique across a run).
    `on_report` receives what the tool reports with `progress` and `partial` (the engine sets
    it; give your own to see a tool's reports in a test of the tool alone).
    """

    run_id: str
    call_id: str
    tool: str
    step: int = 0
    position: int = 0
    idempotency_key: str = ""
    seq: int = 0
    """The seq of the call's start (`ToolCallStarted`) in the run's log (0: not known)."""
    on_report: Report | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            key = (
                call_key(self.run_id, self.step, self.position) if self.run_id else uuid.uuid4().hex
            )
            object.__setattr__(self, "idempotency_key", key)

    def progress(self, text: str) -> None:
        """Say how the call is going ("fetched 3 of 10 pages"): `engine.stream()` yields it as
        a `ToolProgress` right away. Not recorded, and not what the LLM reads (the result is);
        from sync and async tools alike, from any thread. Without a run, nothing happens."""
        if not isinstance(text, str):
            raise TypeError(
                f"ctx.progress() takes the text to show, not {type(text).__name__}; "
                "pass a value with ctx.partial(value)."
            )
        if self.on_report is not None:
            self.on_report("progress", text)

    def partial(self, value: Any) -> None:
        """Hand over part of the result while the call goes on (rows found so far, a first
        draft): `engine.stream()` yields it as a `ToolPartial`. Not recorded: the LLM reads the
        result the tool returns, which is all the log keeps."""
        if self.on_report is not None:
            self.on_report("partial", value)

    @classmethod
    def current(cls) -> ToolContext | None:
        """The context of the tool call running now (in a tool or a custom tool runner)."""
        return _current.get()


_current: ContextVar[ToolContext | None] = ContextVar("agentsm_tool_context", default=None)
