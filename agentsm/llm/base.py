"""The LlmCaller protocol: the single seam between the state machine and any LLM provider."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry
    from ..types import LlmResponse

__all__ = ["LlmCaller", "emit_text"]


@runtime_checkable
class LlmCaller(Protocol):
    """Anything with this one method can drive an agent.

    Build the request from `memory.build_messages()` and `tools.schemas()`; an empty `model`
    means "your own default". Return an `LlmResponse`; raise to report a failure (the run then
    ends through FatalError, with the exception's type and message in the log).
    """

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        """One LLM call."""
        ...


_text_sink: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "agentsm_text_sink", default=None
)


def emit_text(delta: str) -> None:
    """Pass a streamed text fragment to `engine.stream()` as it arrives (no-op elsewhere)."""
    sink = _text_sink.get()
    if sink is not None and delta:
        sink(delta)
